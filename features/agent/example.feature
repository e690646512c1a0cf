Feature: One agent run, end to end: the loop's rules working together
  As someone learning what a durable agent run promises
  I want one run that shows the rules together, the way an application meets them
  So that I can read what each rule does when the others are also at work

  The run looks up two zones at once, and one lookup fails the first time: the failure is fed
  back to the model, fenced as data, and the model asks again. With the second lookup it asks
  for a transfer, which needs a person's approval: the run waits at the gate before any call of
  that response runs, and the system is killed while it waits. After the restart the run waits
  at the same gate, the person approves, the calls run, the model is asked once more, and the
  answer is remembered in the person's memory, marked as coming from a run that saw untrusted
  text.

  @profile:agent @req:ADR0121-D8-01 @crash @configures
  Scenario: Parallel lookups with a flaky tool, a transfer parked for a person across a crash, and the answer remembered
    Given the agent has memory
    And the model calls at once:
      | tool  | arguments     |
      | north | {"zone": "n"} |
      | south | {"zone": "s"} |
    And the tool "north" answers {"level": 7}
    And the tool "south" fails with status 503 and says "try again"
    And the model calls at once:
      | tool     | arguments       |
      | south    | {"zone": "s"}   |
      | transfer | {"amount": 500} |
    And the tool "south" answers {"level": 4}
    And the tool "transfer" answers {"done": true}
    And the model replies "North is at 7, south at 4; 500 transferred."
    When alice starts a run with:
      """
      {"prompt": "level the zones", "parallelTools": true,
       "needsApproval": {"north": false, "south": false, "transfer": true},
       "writeBack": {"allowDirect": true}}
      """
    Then the run waits for a person on:
      | kind     | id    | name     | arguments      |
      | approval | t2-c1 | transfer | {"amount":500} |
    And request 2 to the model holds the messages:
      | role      | content                                                                                 |
      | user      | level the zones                                                                         |
      | assistant | [calls north {"zone":"n"}, south {"zone":"s"}]                                          |
      | tool      | {"level": 7} [for north]                                                                |
      | tool      | {"untrusted": {"source": "tool-error:south", "data": {"error": "try again"}}} [for south] |
    And the tool "south" has been called 1 time in all
    And the tool "transfer" was never called
    When the system is killed and restarted
    Then the run waits for a person on:
      | kind     | id    | name     | arguments      |
      | approval | t2-c1 | transfer | {"amount":500} |
    And the model has been asked 2 times in all
    When alice approves the gate "t2-c1"
    Then the run ends completed
    And the run's output is "North is at 7, south at 4; 500 transferred."
    And the run's tool-call log is:
      | name     | arguments      | ok    | result        |
      | north    | {"zone":"n"}   | true  | {"level":7}   |
      | south    | {"zone":"s"}   | false | try again     |
      | south    | {"zone":"s"}   | true  | {"level":4}   |
      | transfer | {"amount":500} | true  | {"done":true} |
    And the model has been asked 3 times in all
    And the tool "north" has been called 1 time in all
    And the tool "south" has been called 2 times in all
    And the tool "transfer" has been called 1 time in all
    And alice's memory scope holds exactly:
      | role      | text                                        | tainted |
      | user      | level the zones                             | false   |
      | assistant | North is at 7, south at 4; 500 transferred. | true    |
