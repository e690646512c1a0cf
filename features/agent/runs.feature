Feature: An agent run is its own durable execution of the canonical loop
  As an agent builder
  I want to start the agent loop directly, read what it did, and stop it in two ways
  So that the loop's rules (failures as feedback, parallel calls, bounds, abort, cancel) hold for
  every run and survive a restart

  A run is started with its prompt and options, belongs to the identity that started it, and is
  read back with its status, its answer, the log of its tool calls in the model's order and, when
  it was aborted, what it had done. Abort is the run's own signal, checked at the loop's
  checkpoints; cancel stops the execution itself at its next step.

  @profile:agent @req:ADR0121-RUN-01
  Scenario: A run started twice under one chosen id starts once
    Given alice starts a run with:
      """
      {"id": "weekly-check", "prompt": "check the pumps"}
      """
    When alice starts the same run again
    And alice's other token starts the same run again
    Then the run ends completed
    And the run's output is "re: check the pumps"
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-RUN-02
  Scenario Outline: Nobody but the run's owner learns that it exists
    Given the model waits before answering
    And alice starts a run with:
      """
      {"prompt": "check the pumps"}
      """
    And the model has been asked 1 time
    Then <who> gets the same 404 as for a missing run on every run route
    And alice's other token reads the run exactly as alice does
    When the model is released
    Then the run ends completed
    And the run has no interrupted payload

    Examples:
      | who                    |
      | bob                    |
      | alice at evil          |
      | alice without a tenant |
      | alice for bob          |
      | alice's delegate       |

  @profile:agent @req:ADR0121-RUN-03
  Scenario Outline: An option that is unknown or of the wrong type is refused by name, and nothing starts
    Then alice starting a run with <options> is refused naming "<field>"
    And the model has been asked 0 times in all

    Examples:
      | options                                                 | field         |
      | {"prompt": "hi", "parallel": true}                      | parallel      |
      | {"prompt": "hi", "parallelTools": 0}                    | parallelTools |
      | {"prompt": "hi", "parallelTools": "2"}                  | parallelTools |
      | {"prompt": "hi", "toolErrors": "ignore"}                | toolErrors    |
      | {"prompt": "hi", "maxIterations": 0}                    | maxIterations |
      | {"prompt": "hi", "maxIterations": 2.5}                  | maxIterations |
      | {"prompt": "hi", "tools": ["no-such-tool"]}             | tools         |
      | {"prompt": 7}                                           | prompt        |
      | {"tools": ["lookup"]}                                   | prompt        |
      | {"prompt": "hi", "id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"} | id |
      | {"prompt": "hi", "id": "_a"}                            | id            |
      | {"prompt": "hi", "id": "ab/"}                           | id            |
      | {"prompt": "hi", "id": "a^b"}                           | id            |
      | {"prompt": "hi", "id": "a`b"}                           | id            |
      | {"prompt": "hi", "id": "abé"}                           | id            |

  @profile:agent @req:ADR0121-RUN-03
  Scenario: A run id of 96 characters, and one of every kind of character it may hold, is taken
    When alice starts a run with:
      """
      {"prompt": "hi", "id": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}
      """
    Then the run ends completed
    When alice starts a run with:
      """
      {"prompt": "hi", "id": "Z9._-z"}
      """
    Then the run ends completed
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D1-05
  Scenario: A failing tool in a run is fed back as an error result and the run goes on
    Given the model calls "lookup" with {"pump": 3}
    And the tool "lookup" fails with status 500 and says "sensor offline"
    And the model replies "The sensor is offline."
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "history": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]}
      """
    Then the run ends completed
    And the run's output is "The sensor is offline."
    And the run's tool-call log is:
      | name   | arguments  | ok    | result         |
      | lookup | {"pump":3} | false | sensor offline |
    And request 2 to the model holds the messages:
      | role      | content                                                                                          |
      | user      | hello                                                                                            |
      | assistant | hi                                                                                               |
      | user      | check pump 3                                                                                     |
      | assistant | [calls lookup {"pump":3}]                                                                        |
      | tool      | {"untrusted": {"source": "tool-error:lookup", "data": {"error": "sensor offline"}}} [for lookup] |
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D1-06
  Scenario: With toolErrors "fail" a failing tool ends the run and the model is not asked again
    Given the model calls "lookup" with {"pump": 3}
    And the tool "lookup" fails with status 500 and says "sensor offline"
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "toolErrors": "fail"}
      """
    Then the run ends failed
    And the run's reason is "tool-failed"
    And the run's tool-call log is:
      | name   | arguments  | ok    | result         |
      | lookup | {"pump":3} | false | sensor offline |
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D1-07
  Scenario Outline: maxIterations bounds the model calls of a run
    Given the model calls "lookup" 2 times in a row
    And the model replies "done"
    When alice starts a run with:
      """
      {"prompt": "look twice", "maxIterations": <max>}
      """
    Then the run ends <status>
    And the model has been asked <asked> times in all
    And the tool "lookup" has been called 2 times in all

    Examples:
      | max | status    | asked |
      | 2   | failed    | 2     |
      | 3   | completed | 3     |

  @profile:agent @req:ADR0121-D1-07
  Scenario Outline: Without maxIterations a run makes at most 8 model calls
    Given the model calls "lookup" <rounds> times in a row
    And the model replies "done"
    When alice starts a run with:
      """
      {"prompt": "look many times"}
      """
    Then the run ends <status>
    And the model has been asked 8 times in all
    And the tool "lookup" has been called <rounds> times in all

    Examples:
      | rounds | status    |
      | 7      | completed |
      | 8      | failed    |

  @profile:agent @req:ADR0121-D2-02
  Scenario Outline: Parallel calls of a run come back in the model's order whichever ends first (<runner>)
    Given the model calls at once:
      | tool  | arguments |
      | north | {}        |
      | south | {}        |
    And the tool "north" waits
    And the tool "south" answers {"zone": "south ok"}
    When alice starts a run with:
      """
      {"prompt": "check both zones", "parallelTools": true, "runner": "<runner>"}
      """
    And the tool "south" answered 1 time
    And the tool "north" has been waiting 300 ms
    And the tool "north" is released
    Then the run ends completed
    And request 2 to the model holds the tool results in the order north, south
    And the run's tool-call log is:
      | name  | arguments | ok   | result             |
      | north | {}        | true | {"ok": true}       |
      | south | {}        | true | {"zone":"south ok"} |

    Examples:
      | runner       |
      | loop         |
      | single-frame |

  @profile:agent @req:ADR0121-D2-03
  Scenario Outline: A numeric parallelTools bound is the most calls in flight at once
    Given the model calls at once:
      | tool   | arguments |
      | north  | {}        |
      | south  | {}        |
      | lookup | {}        |
    And the tool "north" waits
    And the tool "south" waits
    And the tool "lookup" waits
    When alice starts a run with:
      """
      {"prompt": "check three zones", "parallelTools": <bound><options>}
      """
    Then <inflight> of the tools "north", "south" and "lookup" are in flight at once, and no more until they are released
    And the run ends completed
    And the run's tool-call log is:
      | name   | arguments | ok   | result       |
      | north  | {}        | true | {"ok": true} |
      | south  | {}        | true | {"ok": true} |
      | lookup | {}        | true | {"ok": true} |

    Examples:
      | bound | inflight | options                  |
      | 1     | 1        |                          |
      | 2     | 2        |                          |
      | 3     | 3        |                          |
      | 2     | 2        | , "needsApproval": {"north": false, "south": false, "lookup": false} |
      | 2     | 2        | , "runner": "single-frame"                                           |

  @profile:agent @req:ADR0121-D2-04
  Scenario: A failing parallel branch is that call's error result; its siblings' results reach the model
    Given the model calls at once:
      | tool  | arguments |
      | north | {}        |
      | south | {}        |
    And the tool "north" fails with status 500 and says "north offline"
    And the tool "south" answers {"zone": "south ok"}
    When alice starts a run with:
      """
      {"prompt": "check both zones", "parallelTools": true}
      """
    Then the run ends completed
    And the run's tool-call log is:
      | name  | arguments | ok    | result              |
      | north | {}        | false | north offline       |
      | south | {}        | true  | {"zone":"south ok"} |
    And request 2 to the model holds the messages:
      | role      | content                                                                                       |
      | user      | check both zones                                                                              |
      | assistant | [calls north {}, south {}]                                                                    |
      | tool      | {"untrusted": {"source": "tool-error:north", "data": {"error": "north offline"}}} [for north] |
      | tool      | {"zone": "south ok"} [for south]                                                              |
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D3-02
  Scenario: An abort during a model call ends the run aborted with the partial text, and nothing more is asked
    Given the model streams "Let me" and waits
    When alice starts a run with:
      """
      {"prompt": "check the pumps"}
      """
    And the model has streamed its first words
    And alice aborts the run
    Then the run ends aborted
    And the run was interrupted with "Let me" after 1 model call, having completed nothing
    And the run's tool-call log is empty
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D3-03
  Scenario: An abort during a tool call lets that call end and runs no further call or model call
    Given the model calls at once:
      | tool  | arguments |
      | north | {}        |
      | south | {}        |
    And the tool "north" waits
    When alice starts a run with:
      """
      {"prompt": "check both zones"}
      """
    And the tools "north" are in flight at once
    And alice aborts the run
    And the tool "north" is released
    Then the run ends aborted
    And the run was interrupted with "" after 1 model call, having completed:
      | name  | arguments | ok   | result       |
      | north | {}        | true | {"ok": true} |
    And the tool "south" was never called
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D3-03
  Scenario Outline: An abort during a tool call of a run with an approval rule that lets it run still runs no further call (<rule>)
    Given the model calls at once:
      | tool  | arguments |
      | north | {}        |
      | south | {}        |
    And the tool "north" waits
    When alice starts a run with:
      """
      {"prompt": "check both zones", "needsApproval": <rule>}
      """
    And the tools "north" are in flight at once
    And alice aborts the run
    And the tool "north" is released
    Then the run ends aborted
    And the run was interrupted with "" after 1 model call, having completed:
      | name  | arguments | ok   | result       |
      | north | {}        | true | {"ok": true} |
    And the run's tool-call log is:
      | name  | arguments | ok   | result       |
      | north | {}        | true | {"ok": true} |
    And the tool "south" was never called
    And the model has been asked 1 time in all

    Examples:
      | rule                              |
      | false                             |
      | {"north": false, "south": false}  |

  @profile:agent @req:ADR0121-D1-25
  Scenario: The same call asked again in a later response is another call, under a key of its own
    Given the model calls "lookup" with {"pump": 3}
    And the next call of the tool "lookup" answers {"pressure": 7}
    And the model calls "lookup" with {"pump": 3}
    And the next call of the tool "lookup" answers {"pressure": 9}
    And the model replies "Pump 3 rose."
    When alice starts a run with:
      """
      {"prompt": "watch pump 3"}
      """
    Then the run ends completed
    And the run's tool-call log is:
      | name   | arguments  | ok   | result         |
      | lookup | {"pump":3} | true | {"pressure":7} |
      | lookup | {"pump":3} | true | {"pressure":9} |
    And the tool "lookup" has been called 2 times in all
    And every call to "lookup" carried an idempotency key of its own
    And the model has been asked 3 times in all

  @profile:agent @req:ADR0121-D1-25
  Scenario: Two equal calls of one response are two calls, each under a key of its own
    Given the model calls at once:
      | tool   | arguments  |
      | lookup | {"pump":3} |
      | lookup | {"pump":3} |
    And the next call of the tool "lookup" answers {"pressure": 7}
    And the next call of the tool "lookup" answers {"pressure": 9}
    And the model replies "Pump 3 read twice."
    When alice starts a run with:
      """
      {"prompt": "read pump 3 twice"}
      """
    Then the run ends completed
    And the run's tool-call log is:
      | name   | arguments  | ok   | result         |
      | lookup | {"pump":3} | true | {"pressure":7} |
      | lookup | {"pump":3} | true | {"pressure":9} |
    And the tool "lookup" has been called 2 times in all
    And every call to "lookup" carried an idempotency key of its own
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D3-03 @crash
  Scenario: An abort that a crash interrupted still stops the run after the restart
    Given the model calls at once:
      | tool  | arguments |
      | north | {}        |
      | south | {}        |
    And the tool "north" waits
    And the tool "north" answers {"zone": "north ok"}
    When alice starts a run with:
      """
      {"prompt": "check both zones"}
      """
    And the tools "north" are in flight at once
    And alice aborts the run
    And the system is killed and restarted
    Then the run ends aborted
    And the run was interrupted with "" after 1 model call, having completed:
      | name  | arguments | ok   | result              |
      | north | {}        | true | {"zone":"north ok"} |
    And the tool "south" was never called
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D3-04
  Scenario: A cancel stops the run at its next step and aborts the tool call in flight
    Given the model calls at once:
      | tool  | arguments |
      | north | {}        |
      | south | {}        |
    And the tool "north" waits
    When alice starts a run with:
      """
      {"prompt": "check both zones"}
      """
    And the tools "north" are in flight at once
    And alice cancels the run
    Then the tool "north" was called and its request was aborted
    And the run ends canceled
    And the tool "south" was never called
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D5-02 @crash
  Scenario: After a restart a run asks the model only what its journal does not hold
    Given the model calls "lookup" with {"pump": 3}
    And the tool "lookup" waits
    And the tool "lookup" answers {"pressure": 7}
    And the model replies "Pump 3 is at 7 bar."
    When alice starts a run with:
      """
      {"prompt": "check pump 3"}
      """
    And the tool "lookup" has been called 1 time
    And the system is killed and restarted
    Then the run ends completed
    And the run's output is "Pump 3 is at 7 bar."
    And the model has been asked 2 times in all
    And request 2 to the model holds the messages:
      | role      | content                          |
      | user      | check pump 3                     |
      | assistant | [calls lookup {"pump":3}]        |
      | tool      | {"pressure": 7} [for lookup]     |
    And the tool "lookup" has been called 2 times in all
    When the system is killed and restarted
    Then the run reads exactly as when it ended
    And the model has been asked 2 times in all
    And the tool "lookup" has been called 2 times in all

  @profile:agent @req:ADR0121-D3-10
  Scenario Outline: A cancel during a model call hangs up on the model and ends the run canceled, whatever the provider does
    Given <model>
    When alice starts a run with:
      """
      {"prompt": "check the pumps"}
      """
    And the model has streamed its first words
    And alice cancels the run
    Then the run ends canceled
    When the model is released
    Then the system hung up on request 1 to the model
    And the run's tool-call log is empty
    And the model has been asked 1 time in all

    Examples:
      | provider                                  | model                                                                                     |
      | the provider stops when aborted           | the model streams "Let me" and waits                                                      |
      | the provider keeps streaming when aborted | the model streams "Let me" and waits, then keeps streaming " and more" whatever happens   |

  @profile:agent @req:ADR0121-D3-02
  Scenario: An abort during a model call whose provider keeps streaming keeps only what was streamed before it
    Given the model streams "Let me" and waits, then keeps streaming " check more" whatever happens
    When alice starts a run with:
      """
      {"prompt": "check the pumps"}
      """
    And the model has streamed its first words
    And alice aborts the run
    Then the run ends aborted
    When the model is released
    Then the system hung up on request 1 to the model
    And the run was interrupted with "Let me" after 1 model call, having completed nothing
    And the run's tool-call log is empty
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D3-11
  Scenario: Parallel calls waiting for a slot when the run is aborted are not run, and the calls that ran are its partial
    Given the model calls at once:
      | tool   | arguments |
      | north  | {}        |
      | south  | {}        |
      | lookup | {}        |
    And the tool "north" waits
    When alice starts a run with:
      """
      {"prompt": "check three zones", "parallelTools": 1}
      """
    And the tools "north" are in flight at once
    And alice aborts the run
    And the tool "north" is released
    Then the run ends aborted
    And the run was interrupted with "" after 1 model call, having completed:
      | name  | arguments | ok   | result       |
      | north | {}        | true | {"ok": true} |
    And the tool "south" was never called
    And the tool "lookup" was never called
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D3-11
  Scenario: An abort that leaves calls of a response unrun stops the run there, with that response's text as its partial
    Given the model says "Checking the three zones." and calls at once:
      | tool   | arguments |
      | north  | {}        |
      | south  | {}        |
      | lookup | {}        |
    And the tool "north" waits
    And the model replies "never asked"
    When alice starts a run with:
      """
      {"prompt": "check three zones", "parallelTools": 1}
      """
    And the tools "north" are in flight at once
    And alice aborts the run
    And the tool "north" is released
    Then the run ends aborted
    And the run was interrupted with "Checking the three zones." after 1 model call, having completed:
      | name  | arguments | ok   | result       |
      | north | {}        | true | {"ok": true} |
    And the tool "south" was never called
    And the tool "lookup" was never called
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D3-11
  Scenario: Parallel calls in flight when the run is aborted all end, and every one of them is in its partial, in the model's order
    Given the model calls at once:
      | tool   | arguments |
      | north  | {}        |
      | south  | {}        |
      | lookup | {}        |
    And the tool "north" waits
    And the tool "south" waits
    And the tool "lookup" answers {"zone": "lookup ok"}
    When alice starts a run with:
      """
      {"prompt": "check three zones", "parallelTools": true}
      """
    And the tools "north" and "south" are in flight at once
    And the tool "lookup" answered 1 time
    And alice aborts the run
    And the tool "south" is released
    And the tool "north" is released
    Then the run ends aborted
    And the run was interrupted with "" after 1 model call, having completed:
      | name   | arguments | ok   | result               |
      | north  | {}        | true | {"ok": true}         |
      | south  | {}        | true | {"ok": true}         |
      | lookup | {}        | true | {"zone":"lookup ok"} |
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D1-24 @crash @configures
  Scenario: A run whose call is in doubt after a crash names the tool and the call's idempotency key
    Given the tool "transfer" is declared not idempotent
    And the model calls "transfer" with {"amount": 5}
    And the tool "transfer" waits
    And the model replies "never asked"
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    And the tool "transfer" has been called 1 time
    And the system is killed and restarted
    Then the run ends failed
    And the run's reason is "effect-in-doubt"
    And the run names the call in doubt: "transfer" with the idempotency key of its call 1
    And the run's tool-call log is empty
    And the run has no terminal failure
    And the tool "transfer" has been called 1 time in all
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D1-24 @crash @configures
  Scenario: Behind approval gates, of two approved parallel calls in flight at a crash the declared one is in doubt and the other runs again
    Given the tool "transfer" is declared not idempotent
    And the model calls at once:
      | tool     | arguments    |
      | transfer | {"amount":5} |
      | lookup   | {"pump":3}   |
    And the tool "transfer" waits
    And the tool "lookup" waits
    And the tool "lookup" answers {"pressure": 7}
    And the model replies "never asked"
    When alice starts a run with:
      """
      {"prompt": "pay and look", "needsApproval": true, "parallelTools": true}
      """
    Then the run waits for a person on:
      | kind     | id    | name     | arguments    |
      | approval | t1-c0 | transfer | {"amount":5} |
    When alice approves the gate "t1-c0"
    Then the run waits for a person on:
      | kind     | id    | name   | arguments  |
      | approval | t1-c1 | lookup | {"pump":3} |
    When alice approves the gate "t1-c1"
    And the tool "transfer" has been called 1 time
    And the tool "lookup" has been called 1 time
    And the system is killed and restarted
    Then the run ends failed
    And the run's reason is "effect-in-doubt"
    And the run names the call in doubt: "transfer" with the idempotency key of its call 1
    And the run's tool-call log is:
      | name   | arguments  | ok   | result          |
      | lookup | {"pump":3} | true | {"pressure": 7} |
    And the tool "transfer" has been called 1 time in all
    And the tool "lookup" has been called 2 times in all
    And every call to "lookup" carried the same idempotency key
    And the model has been asked 1 time in all
