Feature: A run parks for a person: approval gates and human tools
  As an agent builder
  I want some tool calls to wait for a person, either to approve them or to answer them
  So that a destructive call never runs on its own and a question to a person survives a restart

  needsApproval says which calls wait at a gate for a person's approval (true waits); the
  deprecated requireApproval says the same with the old polarity (true runs on its own). A run
  that waits has status "waiting" and lists what it waits on; the gates of one model response
  are asked first, one at a time in call order, before any call of that response runs. A tool
  declared kind "human" is asked through the tool server and waits for the person's answer,
  which becomes its result.

  @profile:agent @req:ADR0121-D2-05
  Scenario Outline: The gates of a response are asked first, one at a time in call order, and a parked turn has run none of its calls
    Given the model calls at once:
      | tool     | arguments     |
      | lookup   | {"q": 1}      |
      | transfer | {"amount": 5} |
    And the tool "lookup" answers {"ok": true}
    And the tool "transfer" answers {"ok": true}
    And the model replies "done"
    When alice starts a run with:
      """
      {"prompt": "pay the invoice", "needsApproval": true, "parallelTools": <parallel>}
      """
    Then the run waits for a person on:
      | kind     | id    | name   | arguments |
      | approval | t1-c0 | lookup | {"q":1}   |
    And alice answering the gate "t1-c1" with approve is refused as not pending
    And the tool "lookup" was never called
    When alice approves the gate "t1-c0"
    Then the run waits for a person on:
      | kind     | id    | name     | arguments    |
      | approval | t1-c1 | transfer | {"amount":5} |
    And the tool "lookup" was never called
    And the tool "transfer" was never called
    When alice approves the gate "t1-c1"
    Then the run ends completed
    And the run's output is "done"
    And the run's tool-call log is:
      | name     | arguments    | ok   | result       |
      | lookup   | {"q":1}      | true | {"ok": true} |
      | transfer | {"amount":5} | true | {"ok": true} |
    And the tool "lookup" has been called 1 time in all
    And the tool "transfer" has been called 1 time in all
    And the model has been asked 2 times in all

    Examples:
      | parallel |
      | false    |
      | true     |

  @profile:agent @req:ADR0121-A1-01
  Scenario Outline: needsApproval parks every call it does not explicitly let run
    Given the model calls at once:
      | tool     | arguments     |
      | lookup   | {"q": 1}      |
      | transfer | {"amount": 5} |
    And the tool "lookup" answers {"ok": true}
    And the tool "transfer" answers {"ok": true}
    And the model replies "done"
    When alice starts a run with:
      """
      {"prompt": "pay the invoice", "needsApproval": <rule>}
      """
    Then the run waits for a person on:
      | kind     | id   | name   | arguments   |
      | approval | <id> | <name> | <arguments> |
    And the tool "lookup" was never called
    When alice approves every gate until the run ends
    Then the run ends completed
    And the tool "lookup" has been called 1 time in all
    And the tool "transfer" has been called 1 time in all

    Examples:
      | rule                                  | id    | name     | arguments    |
      | true                                  | t1-c0 | lookup   | {"q":1}      |
      | {"lookup": true}                      | t1-c0 | lookup   | {"q":1}      |
      | {"lookup": false}                     | t1-c1 | transfer | {"amount":5} |
      | {"lookup": false, "transfer": true}   | t1-c1 | transfer | {"amount":5} |
      | {}                                    | t1-c0 | lookup   | {"q":1}      |

  @profile:agent @req:ADR0121-A1-02
  Scenario Outline: Only an explicit false lets a call run without a person
    Given the model calls at once:
      | tool     | arguments     |
      | lookup   | {"q": 1}      |
      | transfer | {"amount": 5} |
    And the tool "lookup" answers {"ok": true}
    And the tool "transfer" answers {"ok": true}
    And the model replies "done"
    When alice starts a run with:
      """
      {"prompt": "pay the invoice"<option>}
      """
    Then the run ends completed
    And the run's tool-call log is:
      | name     | arguments    | ok   | result       |
      | lookup   | {"q":1}      | true | {"ok": true} |
      | transfer | {"amount":5} | true | {"ok": true} |
    And the model has been asked 2 times in all

    Examples:
      | option                                                    |
      |                                                           |
      | , "needsApproval": false                                  |
      | , "needsApproval": {"lookup": false, "transfer": false}   |
      | , "requireApproval": true                                 |
      | , "requireApproval": {"lookup": true, "transfer": true}   |

  @profile:agent @req:ADR0121-A1-03
  Scenario Outline: requireApproval keeps its old polarity: true runs on its own, false waits
    Given the model calls at once:
      | tool     | arguments     |
      | lookup   | {"q": 1}      |
      | transfer | {"amount": 5} |
    And the tool "lookup" answers {"ok": true}
    And the tool "transfer" answers {"ok": true}
    And the model replies "done"
    When alice starts a run with:
      """
      {"prompt": "pay the invoice", "requireApproval": <rule>}
      """
    Then the run waits for a person on:
      | kind     | id   | name   | arguments   |
      | approval | <id> | <name> | <arguments> |
    And the tool "lookup" was never called
    When alice approves every gate until the run ends
    Then the run ends completed
    And the tool "lookup" has been called 1 time in all
    And the tool "transfer" has been called 1 time in all

    Examples:
      | rule                                  | id    | name     | arguments    |
      | false                                 | t1-c0 | lookup   | {"q":1}      |
      | {"lookup": false}                     | t1-c0 | lookup   | {"q":1}      |
      | {"lookup": true}                      | t1-c1 | transfer | {"amount":5} |
      | {"lookup": true, "transfer": false}   | t1-c1 | transfer | {"amount":5} |

  @profile:agent @req:ADR0121-A1-04
  Scenario Outline: An approval option of the wrong shape, or both spellings at once, is refused by name and nothing starts
    Then alice starting a run with <options> is refused naming "<field>"
    And the model has been asked 0 times in all

    Examples:
      | options                                                                    | field           |
      | {"prompt": "hi", "needsApproval": true, "requireApproval": true}           | requireApproval |
      | {"prompt": "hi", "needsApproval": false, "requireApproval": false}         | requireApproval |
      | {"prompt": "hi", "needsApproval": "yes"}                                   | needsApproval   |
      | {"prompt": "hi", "needsApproval": null}                                    | needsApproval   |
      | {"prompt": "hi", "needsApproval": ["transfer"]}                            | needsApproval   |
      | {"prompt": "hi", "needsApproval": {"transfer": "no"}}                      | needsApproval   |
      | {"prompt": "hi", "needsApproval": {"no-such-tool": false}}                 | needsApproval   |
      | {"prompt": "hi", "requireApproval": 1}                                     | requireApproval |
      | {"prompt": "hi", "requireApproval": {"transfer": null}}                    | requireApproval |
      | {"prompt": "hi", "requireApproval": {"no-such-tool": true}}                | requireApproval |

  @profile:agent @req:ADR0121-A1-05 @crash
  Scenario: The deprecation warning of requireApproval is given once per system process
    When alice starts a run with:
      """
      {"prompt": "first", "needsApproval": false}
      """
    Then the start answer carries no warning
    When alice starts a run with:
      """
      {"prompt": "second", "requireApproval": true}
      """
    Then the start answer warns "LOOM_AGENT_REQUIRE_APPROVAL_DEPRECATED"
    When alice starts a run with:
      """
      {"prompt": "third", "requireApproval": true}
      """
    Then the start answer carries no warning
    When bob starts a run with:
      """
      {"prompt": "fourth", "requireApproval": false}
      """
    Then the start answer carries no warning
    When the system is killed and restarted
    And alice starts a run with:
      """
      {"prompt": "fifth", "requireApproval": true}
      """
    Then the start answer warns "LOOM_AGENT_REQUIRE_APPROVAL_DEPRECATED"

  @profile:agent @req:ADR0121-A1-06
  Scenario Outline: The same decision spelled either way gives the same gates, model requests and tool calls
    Given the model calls at once:
      | tool     | arguments     |
      | lookup   | {"q": 1}      |
      | transfer | {"amount": 5} |
    And the tool "lookup" answers {"ok": true}
    And the tool "transfer" answers {"ok": true}
    And the model replies "done"
    When alice starts a run with:
      """
      {"prompt": "pay the invoice", <option>}
      """
    Then the run waits for a person on:
      | kind     | id    | name     | arguments    |
      | approval | t1-c1 | transfer | {"amount":5} |
    And the tool "lookup" was never called
    When alice denies the gate "t1-c1"
    Then the run ends completed
    And the run's tool-call log is:
      | name     | arguments    | ok    | result       |
      | lookup   | {"q":1}      | true  | {"ok": true} |
      | transfer | {"amount":5} | false | not approved |
    And request 2 to the model holds the messages:
      | role      | content                                        |
      | user      | pay the invoice                                |
      | assistant | [calls lookup {"q":1}, transfer {"amount":5}]  |
      | tool      | {"ok": true} [for lookup]                      |
      | tool      | {"error": "not approved"} [for transfer]       |
    And the tool "lookup" has been called 1 time in all
    And the tool "transfer" was never called
    And the model has been asked 2 times in all

    Examples:
      | option                                      |
      | "needsApproval": {"lookup": false}          |
      | "requireApproval": {"lookup": true}         |
      | "needsApproval": {"lookup": false, "transfer": true}   |
      | "requireApproval": {"lookup": true, "transfer": false} |

  @profile:agent @req:ADR0121-D2-06
  Scenario: A denied call never runs and the model is told it was not approved
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" answers {"ok": true}
    And the model replies "I did not pay."
    When alice starts a run with:
      """
      {"prompt": "pay the invoice", "needsApproval": true}
      """
    Then the run waits for a person on:
      | kind     | id    | name     | arguments    |
      | approval | t1-c0 | transfer | {"amount":5} |
    When alice denies the gate "t1-c0"
    Then the run ends completed
    And the run's output is "I did not pay."
    And the run's tool-call log is:
      | name     | arguments    | ok    | result       |
      | transfer | {"amount":5} | false | not approved |
    And request 2 to the model holds the messages:
      | role      | content                                  |
      | user      | pay the invoice                          |
      | assistant | [calls transfer {"amount":5}]            |
      | tool      | {"error": "not approved"} [for transfer] |
    And the tool "transfer" was never called
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D2-02 @req:ADR0121-D2-06
  Scenario: With parallel calls, a denied call keeps its place: every result reaches the model in the model's order
    Given the model calls at once:
      | tool     | arguments     |
      | transfer | {"amount": 5} |
      | north    | {}            |
      | south    | {}            |
    And the tool "north" answers {"zone": "north ok"}
    And the tool "south" answers {"zone": "south ok"}
    And the model replies "zones checked, not paid"
    When alice starts a run with:
      """
      {"prompt": "pay and check", "needsApproval": true, "parallelTools": true}
      """
    Then the run waits for a person on:
      | kind     | id    | name     | arguments    |
      | approval | t1-c0 | transfer | {"amount":5} |
    When alice denies the gate "t1-c0"
    Then the run waits for a person on:
      | kind     | id    | name  | arguments |
      | approval | t1-c1 | north | {}        |
    When alice approves the gate "t1-c1"
    Then the run waits for a person on:
      | kind     | id    | name  | arguments |
      | approval | t1-c2 | south | {}        |
    When alice approves the gate "t1-c2"
    Then the run ends completed
    And the run's tool-call log is:
      | name     | arguments    | ok    | result             |
      | transfer | {"amount":5} | false | not approved       |
      | north    | {}           | true  | {"zone": "north ok"} |
      | south    | {}           | true  | {"zone": "south ok"} |
    And request 2 to the model holds the messages:
      | role      | content                                  |
      | user      | pay and check                            |
      | assistant | [calls transfer {"amount":5}, north {}, south {}] |
      | tool      | {"error": "not approved"} [for transfer] |
      | tool      | {"zone": "north ok"} [for north]         |
      | tool      | {"zone": "south ok"} [for south]         |
    And the tool "transfer" was never called

  @profile:agent @req:ADR0121-D2-07
  Scenario Outline: Nobody but the run's owner can answer what it waits for, nor learn that it exists
    Given the tool "ask" is answered by a person
    And the model calls "transfer" with {"amount": 5}
    And the tool "transfer" answers {"ok": true}
    And the model replies "paid"
    When alice starts a run with:
      """
      {"prompt": "pay the invoice", "needsApproval": true}
      """
    Then the run waits for a person on:
      | kind     | id    | name     | arguments    |
      | approval | t1-c0 | transfer | {"amount":5} |
    And <who> gets the same 404 as for a missing run on every answer route
    And the tool "transfer" was never called
    When alice's other token approves the gate "t1-c0"
    Then the run ends completed
    And the tool "transfer" has been called 1 time in all

    Examples:
      | who                    |
      | bob                    |
      | alice at evil          |
      | alice without a tenant |
      | alice for bob          |
      | alice's delegate       |

  @profile:agent @req:ADR0121-D2-08
  Scenario: Answering a gate again the same way changes nothing; any other answer to a gate that does not wait is a conflict
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" answers {"ok": true}
    And the model replies "paid"
    When alice starts a run with:
      """
      {"prompt": "pay the invoice", "needsApproval": true}
      """
    Then the run waits for a person on:
      | kind     | id    | name     | arguments    |
      | approval | t1-c0 | transfer | {"amount":5} |
    And alice answering the gate "t9-c9" with approve is refused as not pending
    And alice answering the human call "t1-c0" with {"answer": "yes"} is refused as not pending
    And alice answering the gate "t1-c0" with the body {"decision": "maybe"} is refused naming "decision"
    And alice answering the gate "t1-c0" with the body {"approved": true} is refused naming "approved"
    And alice answering the human call "t1-c0" with the body {"result": null} is refused naming "result"
    And alice answering the human call "t1-c0" with the body {} is refused naming "result"
    When alice approves the gate "t1-c0"
    And alice approves the gate "t1-c0"
    Then alice answering the gate "t1-c0" with deny is refused as not pending
    And the run ends completed
    And alice approves the gate "t1-c0"
    And alice answering the gate "t1-c0" with deny is refused as not pending
    And the tool "transfer" has been called 1 time in all
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D2-09 @crash
  Scenario: A parked run survives a restart, is asked the same gates in the same order, and goes on with one more model call
    Given the model calls at once:
      | tool     | arguments     |
      | lookup   | {"q": 1}      |
      | transfer | {"amount": 5} |
    And the tool "lookup" answers {"ok": true}
    And the tool "transfer" answers {"ok": true}
    And the model replies "done"
    When alice starts a run with:
      """
      {"prompt": "pay the invoice", "needsApproval": true, "parallelTools": true}
      """
    Then the run waits for a person on:
      | kind     | id    | name   | arguments |
      | approval | t1-c0 | lookup | {"q":1}   |
    When the system is killed and restarted
    Then the run waits for a person on:
      | kind     | id    | name   | arguments |
      | approval | t1-c0 | lookup | {"q":1}   |
    When alice approves the gate "t1-c0"
    Then the run waits for a person on:
      | kind     | id    | name     | arguments    |
      | approval | t1-c1 | transfer | {"amount":5} |
    When the system is killed and restarted
    Then the run waits for a person on:
      | kind     | id    | name     | arguments    |
      | approval | t1-c1 | transfer | {"amount":5} |
    And alice answering the gate "t1-c0" with deny is refused as not pending
    And the tool "lookup" was never called
    And the model has been asked 1 time in all
    When alice approves the gate "t1-c1"
    Then the run ends completed
    And the run's tool-call log is:
      | name     | arguments    | ok   | result       |
      | lookup   | {"q":1}      | true | {"ok": true} |
      | transfer | {"amount":5} | true | {"ok": true} |
    And the model has been asked 2 times in all
    And the tool "lookup" has been called 1 time in all
    And the tool "transfer" has been called 1 time in all

  @profile:agent @req:ADR0121-D2-10
  Scenario: A human tool is asked through the tool server and its answer, never the 202, is its result
    Given the tool "ask" is answered by a person
    And the model calls "ask" with {"question": "pay 5?"}
    And the model replies "The person said yes."
    When alice starts a run with:
      """
      {"prompt": "ask before paying"}
      """
    Then the run waits for a person on:
      | kind  | id    | name | arguments              |
      | human | t1-c0 | ask  | {"question":"pay 5?"}  |
    And the tool "ask" has been called 1 time
    And the model has been asked 1 time in all
    When alice answers the human call "t1-c0" with {"answer": "yes"}
    Then the run ends completed
    And the run's output is "The person said yes."
    And the run's tool-call log is:
      | name | arguments             | ok   | result            |
      | ask  | {"question":"pay 5?"} | true | {"answer": "yes"} |
    And request 2 to the model holds the messages:
      | role      | content                          |
      | user      | ask before paying                |
      | assistant | [calls ask {"question":"pay 5?"}] |
      | tool      | {"answer": "yes"} [for ask]      |
    And no message of any request to the model holds "pending"
    And the model has been asked 2 times in all
    And the tool "ask" has been called 1 time in all

  @profile:agent @req:ADR0121-D2-11 @crash
  Scenario: A human call asked again after a restart is asked with the same key, and its answer is consumed once
    Given the tool "ask" is answered by a person
    And the model calls "ask" with {"question": "pay 5?"}
    And the model replies "The person said yes."
    When alice starts a run with:
      """
      {"prompt": "ask before paying"}
      """
    Then the run waits for a person on:
      | kind  | id    | name | arguments              |
      | human | t1-c0 | ask  | {"question":"pay 5?"}  |
    And the tool "ask" has been called 1 time
    When the system is killed and restarted
    Then the run waits for a person on:
      | kind  | id    | name | arguments              |
      | human | t1-c0 | ask  | {"question":"pay 5?"}  |
    And the tool "ask" has been called 2 times
    And every call to "ask" carried the same idempotency key
    When alice answers the human call "t1-c0" with {"answer": "yes"}
    And alice answers the human call "t1-c0" with {"answer": "yes"}
    Then the run ends completed
    And alice answering the human call "t1-c0" with {"answer": "no"} is refused as not pending
    When the system is killed and restarted
    Then the run reads exactly as when it ended
    And the run's tool-call log is:
      | name | arguments             | ok   | result            |
      | ask  | {"question":"pay 5?"} | true | {"answer": "yes"} |
    And the tool "ask" has been called 2 times in all
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D2-12
  Scenario: A response holding a human tool keeps the sequential shape even with parallel tools: each call's gate, then that call
    Given the tool "ask" is answered by a person
    And the model calls at once:
      | tool     | arguments              |
      | ask      | {"question": "pay 5?"} |
      | transfer | {"amount": 5}          |
    And the tool "transfer" answers {"ok": true}
    And the model replies "done"
    When alice starts a run with:
      """
      {"prompt": "ask, then pay", "parallelTools": true, "needsApproval": {"ask": false}}
      """
    Then the run waits for a person on:
      | kind  | id    | name | arguments              |
      | human | t1-c0 | ask  | {"question":"pay 5?"}  |
    And the tool "ask" has been called 1 time
    When alice answers the human call "t1-c0" with {"answer": "yes"}
    Then the run waits for a person on:
      | kind     | id    | name     | arguments    |
      | approval | t1-c1 | transfer | {"amount":5} |
    And the tool "transfer" was never called
    When alice approves the gate "t1-c1"
    Then the run ends completed
    And the run's tool-call log is:
      | name     | arguments             | ok   | result            |
      | ask      | {"question":"pay 5?"} | true | {"answer": "yes"} |
      | transfer | {"amount":5}          | true | {"ok": true}      |
    And the tool "ask" has been called 1 time in all
    And the tool "transfer" has been called 1 time in all

  @profile:agent @req:ADR0121-A1-07
  Scenario: A human tool that needs approval asks for the approval first, then for its answer
    Given the tool "ask" is answered by a person
    And the model calls "ask" with {"question": "pay 5?"}
    And the model replies "done"
    When alice starts a run with:
      """
      {"prompt": "ask before paying", "needsApproval": true}
      """
    Then the run waits for a person on:
      | kind     | id    | name | arguments             |
      | approval | t1-c0 | ask  | {"question":"pay 5?"} |
    And the tool "ask" was never called
    When alice approves the gate "t1-c0"
    Then the run waits for a person on:
      | kind  | id    | name | arguments             |
      | human | t1-c0 | ask  | {"question":"pay 5?"} |
    And the tool "ask" has been called 1 time
    When alice answers the human call "t1-c0" with {"answer": "yes"}
    Then the run ends completed
    And the run's tool-call log is:
      | name | arguments             | ok   | result            |
      | ask  | {"question":"pay 5?"} | true | {"answer": "yes"} |
    And the tool "ask" has been called 1 time in all

  @profile:agent @req:ADR0121-D2-13
  Scenario Outline: A cancel stops a run that waits for a person, and what it waited on never runs
    Given the tool "ask" is answered by a person
    And the model calls "<tool>" with {"amount": 5}
    And the tool "transfer" answers {"ok": true}
    And the model replies "done"
    When alice starts a run with:
      """
      {"prompt": "pay the invoice", "needsApproval": {"ask": false, "transfer": true}}
      """
    Then the run waits for a person on:
      | kind   | id    | name   | arguments    |
      | <kind> | t1-c0 | <tool> | {"amount":5} |
    And the tool "ask" has been called <asked> time
    When alice cancels the run
    Then the run stops waiting and ends canceled
    And alice answering the <route> "t1-c0" with <answer> is refused as not pending
    And the tool "transfer" was never called
    And the tool "ask" has been called <asked> time in all
    And the model has been asked 1 time in all

    Examples:
      | tool     | kind     | asked | route      | answer             |
      | transfer | approval | 0     | gate       | approve            |
      | ask      | human    | 1     | human call | {"answer": "yes"}  |
