Feature: A principal calls only the tools it is granted, and one request starts bounded work
  As a host that hands out tools to some principals and not to others
  I want a run and a turn to call only the tools their principal is granted, and a run's work bounded
  So that a narrow token cannot reach a tool the host kept from it, and no request keeps the model busy without end

  The configuration gives each principal its grants (identity.principals[].grants, or the answer of
  the identity service): the tools it may call. Absent grants mean every tool; a list, an empty one
  included, means exactly the tools it names (spec/world.md, Identity). A call of a tool the
  principal is not granted is an authority denial: the tool is never called, and the run or turn
  ends failed with reason "denied", the model not asked again. A run's maxIterations is bounded by
  runs.maxIterations (64 by default).

  @profile:agent @req:ADR0121-GRANT-01 @configures
  Scenario: A run calls the tool its owner is granted and is denied the one it is not
    Given the setting "identity.principals" is {"tok-bob": {"tenant": "acme", "actor": "bob", "grants": ["lookup"]}}
    And the model calls "lookup" with {"pump": 3}
    And the tool "lookup" answers {"pressure": 7}
    And the model calls "transfer" with {"amount": 10}
    And the model replies "Moved."
    When bob starts a run with:
      """
      {"prompt": "check pump 3, then move the money"}
      """
    Then the run ends failed
    And the run's reason is "denied"
    And the run's tool-call log is:
      | name   | arguments  | ok   | result          |
      | lookup | {"pump":3} | true | {"pressure":7}  |
    And the model has been asked 2 times in all
    And request 2 to the model holds the messages:
      | role      | content                           |
      | user      | check pump 3, then move the money |
      | assistant | [calls lookup {"pump":3}]         |
      | tool      | {"pressure": 7} [for lookup]      |
    And the tool "lookup" has been called 1 time in all
    And the tool "transfer" was never called

  @profile:agent @req:ADR0121-GRANT-01 @configures
  Scenario: A conversation turn calls the tool its asker is granted and is denied the one it is not
    Given the setting "identity.principals" is {"tok-bob": {"tenant": "acme", "actor": "bob", "grants": ["lookup"]}}
    And bob has started a conversation
    And the model calls "lookup" with {"pump": 3}
    And the tool "lookup" answers {"pressure": 7}
    And the model calls "transfer" with {"amount": 10}
    And the model replies "Moved."
    When bob sends "check pump 3, then move the money"
    Then turn 1 fails with reason "denied"
    And the model has been asked 2 times in all
    And request 2 to the model holds the messages:
      | role      | content                           |
      | user      | check pump 3, then move the money |
      | assistant | [calls lookup {"pump":3}]         |
      | tool      | {"pressure": 7} [for lookup]      |
    And the tool "lookup" has been called 1 time in all
    And the tool "transfer" was never called

  @profile:agent @req:ADR0121-GRANT-02 @configures
  Scenario Outline: Absent grants mean every tool; a list, an empty one included, means exactly its tools
    Given the setting "identity.principals" is {"tok-bob": <bob>}
    And the model calls "transfer" with {"amount": 10}
    And the tool "transfer" answers {"done": true}
    When bob starts a run with:
      """
      {"prompt": "move the money"}
      """
    Then the run ends <status>
    And the tool "transfer" has been called <calls> times in all
    And the model has been asked <asked> times in all

    Examples:
      | bob                                                                      | status    | calls | asked |
      | {"tenant": "acme", "actor": "bob"}                                       | completed | 1     | 2     |
      | {"tenant": "acme", "actor": "bob", "grants": ["transfer"]}               | completed | 1     | 2     |
      | {"tenant": "acme", "actor": "bob", "grants": ["lookup", "transfer"]}     | completed | 1     | 2     |
      | {"tenant": "acme", "actor": "bob", "grants": []}                         | failed    | 0     | 1     |
      | {"tenant": "acme", "actor": "bob", "grants": ["lookup"]}                 | failed    | 0     | 1     |

  @profile:agent @req:ADR0121-GRANT-02
  Scenario Outline: The identity service's grants hold as the configuration's do
    Given the model calls "transfer" with {"amount": 10}
    And the tool "transfer" answers {"done": true}
    When a token introspected as <principal> starts a run with:
      """
      {"prompt": "move the money"}
      """
    Then the run ends <status>
    And the tool "transfer" has been called <calls> times in all

    Examples:
      | principal                                                  | status    | calls |
      | {"tenant": "acme", "actor": "zoe"}                         | completed | 1     |
      | {"tenant": "acme", "actor": "zoe", "grants": ["transfer"]} | completed | 1     |
      | {"tenant": "acme", "actor": "zoe", "grants": []}           | failed    | 0     |

  @profile:agent @req:ADR0121-GRANT-03 @configures
  Scenario: A run that names a tool its owner is not granted is refused, and nothing starts
    Given the setting "identity.principals" is {"tok-bob": {"tenant": "acme", "actor": "bob", "grants": ["lookup"]}}
    Then bob starting a run with {"prompt": "hi", "tools": ["transfer"]} is refused naming "tools"
    And bob starting a run with {"prompt": "hi", "tools": ["lookup", "transfer"]} is refused naming "tools"
    And the model has been asked 0 times in all
    When bob starts a run with:
      """
      {"prompt": "hi", "tools": ["lookup"]}
      """
    Then the run ends completed
    And the run's output is "re: hi"

  @profile:agent @req:ADR0121-GRANT-04 @crash @configures
  Scenario: A restart that takes a grant away does not take it from a run started before it
    Given the setting "identity.principals" is {"tok-bob": {"tenant": "acme", "actor": "bob", "grants": ["lookup", "transfer"]}}
    And the model calls "transfer" with {"amount": 10}
    And the tool "transfer" answers {"moved": 10}
    And the model replies "Moved."
    When bob starts a run with:
      """
      {"prompt": "move the money", "needsApproval": true}
      """
    Then the run waits for a person on:
      | kind     | id    | name     | arguments     |
      | approval | t1-c0 | transfer | {"amount":10} |
    When the system is killed and restarted with the setting "identity.principals" at {"tok-bob": {"tenant": "acme", "actor": "bob", "grants": ["lookup"]}}
    And bob approves the gate "t1-c0"
    Then the run ends completed
    And the run's output is "Moved."
    And the run's tool-call log is:
      | name     | arguments     | ok   | result      |
      | transfer | {"amount":10} | true | {"moved":10} |
    And the tool "transfer" has been called 1 time in all
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-GRANT-04 @crash @configures
  Scenario: A restart that adds a grant does not give it to a run started before it
    Given the setting "identity.principals" is {"tok-bob": {"tenant": "acme", "actor": "bob", "grants": ["lookup"]}}
    And the model calls "lookup" with {"pump": 3}
    And the tool "lookup" answers {"pressure": 7}
    And the model calls "transfer" with {"amount": 10}
    And the model replies "Moved."
    When bob starts a run with:
      """
      {"prompt": "check pump 3, then move the money", "needsApproval": {"lookup": true, "transfer": false}}
      """
    Then the run waits for a person on:
      | kind     | id    | name   | arguments  |
      | approval | t1-c0 | lookup | {"pump":3} |
    When the system is killed and restarted with the setting "identity.principals" at {"tok-bob": {"tenant": "acme", "actor": "bob", "grants": ["lookup", "transfer"]}}
    And bob approves the gate "t1-c0"
    Then the run ends failed
    And the run's reason is "denied"
    And the run's tool-call log is:
      | name   | arguments  | ok   | result         |
      | lookup | {"pump":3} | true | {"pressure":7} |
    And the tool "transfer" was never called
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-RUN-04
  Scenario Outline: A run may ask for at most 64 model calls by default
    Then alice starting a run with {"prompt": "hi", "maxIterations": <n>} is refused naming "maxIterations"
    And the model has been asked 0 times in all

    Examples:
      | n          |
      | 65         |
      | 1000000000 |

  @profile:agent @req:ADR0121-RUN-04
  Scenario: A run may ask for exactly the default ceiling
    When alice starts a run with:
      """
      {"prompt": "hi", "maxIterations": 64}
      """
    Then the run ends completed
    And the run's output is "re: hi"

  @profile:agent @req:ADR0121-RUN-04 @configures
  Scenario: A configured ceiling admits N model calls and refuses N+1
    Given the setting "runs.maxIterations" is 3
    And the model calls "lookup" 4 times in a row
    Then alice starting a run with {"prompt": "hi", "maxIterations": 4} is refused naming "maxIterations"
    And the model has been asked 0 times in all
    When alice starts a run with:
      """
      {"prompt": "keep looking", "maxIterations": 3}
      """
    Then the run ends failed
    And the run's reason is "turn-failed"
    And the model has been asked 3 times in all
    And the tool "lookup" has been called 3 times in all

  @profile:agent @req:ADR0121-RUN-04 @configures
  Scenario: A run that names no bound gets the default, or the ceiling when that is lower
    Given the setting "runs.maxIterations" is 2
    And the model calls "lookup" 3 times in a row
    When alice starts a run with:
      """
      {"prompt": "keep looking"}
      """
    Then the run ends failed
    And the run's reason is "turn-failed"
    And the model has been asked 2 times in all
    And the tool "lookup" has been called 2 times in all
