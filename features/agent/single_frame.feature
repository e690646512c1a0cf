Feature: The single-frame runner: the whole loop in one journaled step
  As an operator who still runs agents on the deprecated single-frame runner
  I want it to refuse what it cannot run safely, and to say plainly what a crash repeats
  So that a tool that must not run twice is never called twice without my consent

  The single-frame runner journals the whole loop as one step, so a crash inside it runs the
  loop again from the start and asks the model again. It refuses an unknown or ill-typed option,
  and a response holding a tool declared not idempotent, before any call of that response runs,
  unless acceptAtLeastOnce is set. Each call inside the frame carries a key of its own, derived
  from the run, the call's place and its input.

  # The deprecated single-frame runner: the whole loop in one journaled step.

  @profile:agent @req:ADR0121-A2-01
  Scenario Outline: A runner option that is unknown or of the wrong type is refused by name, and nothing starts
    Then alice starting a run with <options> is refused naming "<field>"
    And the model has been asked 0 times in all

    Examples:
      | options                                                                | field             |
      | {"prompt": "hi", "runner": "frames"}                                   | runner            |
      | {"prompt": "hi", "runner": ""}                                         | runner            |
      | {"prompt": "hi", "runner": 1}                                          | runner            |
      | {"prompt": "hi", "runner": "single-frame", "acceptAtLeastOnce": "yes"} | acceptAtLeastOnce |
      | {"prompt": "hi", "acceptAtLeastOnce": true}                            | acceptAtLeastOnce |
      | {"prompt": "hi", "runner": "loop", "acceptAtLeastOnce": true}          | acceptAtLeastOnce |

  @profile:agent @req:ADR0121-A2-02 @configures
  Scenario: The single-frame runner refuses a tool declared not idempotent, and never calls it
    Given the tool "transfer" is declared not idempotent
    And the model calls "transfer" with {"amount": 5}
    And the model replies "never asked"
    When alice starts a run with:
      """
      {"prompt": "move 5", "runner": "single-frame"}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "IdempotentToolRefusedError" as "IdempotentToolRefusedError" at depth 0
    And the run's tool-call log is empty
    And the tool "transfer" was never called
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-A2-02 @configures
  Scenario: The canonical loop runs a tool declared not idempotent
    Given the tool "transfer" is declared not idempotent
    And the model calls "transfer" with {"amount": 5}
    And the tool "transfer" answers {"moved": 5}
    And the model replies "Moved 5."
    When alice starts a run with:
      """
      {"prompt": "move 5", "runner": "loop"}
      """
    Then the run ends completed
    And the run has no terminal failure
    And the tool "transfer" has been called 1 time in all

  @profile:agent @req:ADR0121-A2-03 @configures
  Scenario Outline: The refusal covers the whole response before any call of it runs (parallelTools <parallel>)
    Given the tool "transfer" is declared not idempotent
    And the model calls at once:
      | tool     | arguments    |
      | lookup   | {"pump":3}   |
      | transfer | {"amount":5} |
    And the tool "lookup" answers {"pressure": 7}
    And the model replies "never asked"
    When alice starts a run with:
      """
      {"prompt": "look, then move 5", "runner": "single-frame", "parallelTools": <parallel>}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "IdempotentToolRefusedError" as "IdempotentToolRefusedError" at depth 0
    And the run's tool-call log is empty
    And the tool "lookup" was never called
    And the tool "transfer" was never called
    And the model has been asked 1 time in all

    Examples:
      | parallel |
      | false    |
      | true     |

  @profile:agent @req:ADR0121-A2-04 @configures
  Scenario: acceptAtLeastOnce lets the single-frame runner call a tool declared not idempotent
    Given the tool "transfer" is declared not idempotent
    And the model calls "transfer" with {"amount": 5}
    And the tool "transfer" answers {"moved": 5}
    And the model replies "Moved 5."
    When alice starts a run with:
      """
      {"prompt": "move 5", "runner": "single-frame", "acceptAtLeastOnce": true}
      """
    Then the run ends completed
    And the run's output is "Moved 5."
    And the run's tool-call log is:
      | name     | arguments    | ok   | result      |
      | transfer | {"amount":5} | true | {"moved":5} |
    And the tool "transfer" has been called 1 time in all

  @profile:agent @req:ADR0121-A2-05 @crash
  Scenario: A crash inside the single frame re-runs the whole loop: the model is asked again from the start
    Given the model calls "lookup" with {"pump": 3}
    And the model calls "lookup" with {"pump": 3}
    And the tool "lookup" waits
    And the tool "lookup" answers {"pressure": 7}
    And the model replies "Pump 3 is at 7 bar."
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "runner": "single-frame"}
      """
    And the tools "lookup" are in flight at once
    And the system is killed and restarted
    Then the run ends completed
    And the run's output is "Pump 3 is at 7 bar."
    And the model has been asked 3 times in all
    And request 2 to the model holds the same messages as request 1
    And the tool "lookup" has been called 2 times in all
    And every call to "lookup" carried the same idempotency key
    When the system is killed and restarted
    Then the run reads exactly as when it ended
    And the model has been asked 3 times in all
    And the tool "lookup" has been called 2 times in all

  @profile:agent @req:ADR0121-A2-05 @crash @configures
  Scenario: With acceptAtLeastOnce a tool declared not idempotent runs again when a crash re-runs the frame
    Given the tool "transfer" is declared not idempotent
    And the model calls "transfer" with {"amount": 5}
    And the model calls "transfer" with {"amount": 5}
    And the tool "transfer" waits
    And the tool "transfer" answers {"moved": 5}
    And the model replies "Moved 5."
    When alice starts a run with:
      """
      {"prompt": "move 5", "runner": "single-frame", "acceptAtLeastOnce": true}
      """
    And the tools "transfer" are in flight at once
    And the system is killed and restarted
    Then the run ends completed
    And the tool "transfer" has been called 2 times in all
    And every call to "transfer" carried the same idempotency key

  @profile:agent @req:ADR0121-A2-06
  Scenario: Each call inside the single frame carries its own key, derived from the run, its place and its input
    Given the model calls at once:
      | tool   | arguments                    |
      | lookup | {"pump": 3}                  |
      | lookup | {"pump":3}                   |
      | north  | {"b": 1, "a": [true, "x y"]} |
    And the model calls "lookup" with {"pump": 4}
    And the tool "lookup" answers {"pressure": 7}
    And the tool "north" answers {"zone": "north ok"}
    And the model replies "All fine."
    When alice starts a run with:
      """
      {"prompt": "check everything", "runner": "single-frame"}
      """
    Then the run ends completed
    And the tool "lookup" has been called 3 times in all
    And call 1 to "lookup" carried the single-frame key of model call 1, position 0, for {"pump": 3}
    And call 2 to "lookup" carried the single-frame key of model call 1, position 1, for {"pump": 3}
    And call 1 to "north" carried the single-frame key of model call 1, position 2, for {"a": [true, "x y"], "b": 1}
    And call 3 to "lookup" carried the single-frame key of model call 2, position 0, for {"pump": 4}

  @profile:agent @req:ADR0121-A2-07 @crash
  Scenario: After a crash a different call at the same place gets a different key
    Given the model calls "lookup" with {"pump": 3}
    And the model calls "lookup" with {"pump": 4}
    And the tool "lookup" waits
    And the tool "lookup" answers {"pressure": 7}
    And the model replies "Pump 4 is at 7 bar."
    When alice starts a run with:
      """
      {"prompt": "check a pump", "runner": "single-frame"}
      """
    And the tools "lookup" are in flight at once
    And the system is killed and restarted
    Then the run ends completed
    And the tool "lookup" has been called 2 times in all
    And call 1 to "lookup" carried the single-frame key of model call 1, position 0, for {"pump": 3}
    And call 2 to "lookup" carried the single-frame key of model call 1, position 0, for {"pump": 4}
