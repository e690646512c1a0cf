Feature: Barge-in: a new message interrupts the running turn
  As a person talking to an agent
  I want to correct or redirect it while it is still answering
  So that I do not have to wait for an answer I no longer want

  With a barge-in source configured, a message that lands while a turn runs interrupts that turn
  at its next checkpoint: the reply is recorded as interrupted with whatever text it had produced,
  the conversation itself carries on, and the interrupting message is the next turn. What the
  interruption did is recorded, so a replay after a crash takes the same branch.

  Background:
    Given barge-in is on

  @profile:barge-in @req:ADR0122-D2-01 @configures
  Scenario: A message that lands while the model is thinking interrupts the turn
    Given alice has started a conversation
    And the model waits before answering
    When alice sends "check the pumps"
    And the model has been asked 1 time
    And alice sends "actually, check the valves"
    Then turn 1 is interrupted with partial ""
    And turn 2 is answered "re: actually, check the valves"
    And the history holds:
      | ord | turn | role      | status      | text                           |
      | 1   | 1    | user      | accepted    | check the pumps                |
      | 2   | 1    | assistant | interrupted |                                |
      | 3   | 2    | user      | accepted    | actually, check the valves     |
      | 4   | 2    | assistant | complete    | re: actually, check the valves |
    And the status says the conversation is "open" after 2 turns
    And the system hung up on request 1 to the model
    And request 2 to the model holds the messages:
      | role      | content                    |
      | user      | check the pumps            |
      | assistant | (interrupted)              |
      | user      | actually, check the valves |
    And the model has been asked 2 times in all

  @profile:barge-in @req:ADR0122-D2-09 @configures
  Scenario Outline: A streamed generation is cut when the message lands and its partial survives (<provider>)
    Given alice has started a conversation
    And <script>
    When alice sends "check the pumps"
    And alice's stream shows "Let me"
    And alice sends "stop, check the valves"
    Then turn 1 is interrupted with partial "Let me"
    When the model is released
    Then turn 2 is answered "re: stop, check the valves"
    And the system hung up on request 1 to the model
    And request 2 to the model holds the messages:
      | role      | content                |
      | user      | check the pumps        |
      | assistant | Let me                 |
      | user      | stop, check the valves |
    And the history holds:
      | ord | turn | role      | status      | text                       |
      | 1   | 1    | user      | accepted    | check the pumps            |
      | 2   | 1    | assistant | interrupted | Let me                     |
      | 3   | 2    | user      | accepted    | stop, check the valves     |
      | 4   | 2    | assistant | complete    | re: stop, check the valves |
    And the model has been asked 2 times in all

    Examples:
      | provider                                 | script                                                                             |
      | the provider stops when it is aborted    | the model streams "Let me" and waits                                               |
      | the provider keeps streaming when aborted | the model streams "Let me" and waits, then keeps streaming " and more" whatever happens |

  @profile:barge-in @req:ADR0122-D2-03 @configures
  Scenario: A message already waiting when a turn starts interrupts it at once
    Given alice has started a conversation
    And the model calls "slow" with {}
    And the tool "slow" waits
    When alice sends "first"
    And the tool "slow" has been called 1 time
    And alice sends "second"
    And alice sends "third"
    And the tool "slow" is released
    Then turn 3 is answered "re: third"
    And the history holds:
      | ord | turn | role      | status      | text      |
      | 1   | 1    | user      | accepted    | first     |
      | 2   | 1    | assistant | interrupted |           |
      | 3   | 2    | user      | accepted    | second    |
      | 4   | 2    | assistant | interrupted |           |
      | 5   | 3    | user      | accepted    | third     |
      | 6   | 3    | assistant | complete    | re: third |
    And the model has been asked 2 times in all
    And the tool "slow" has been called 1 time in all
    And request 2 to the model holds the messages:
      | role      | content       |
      | user      | first         |
      | assistant | (interrupted) |
      | user      | second        |
      | assistant | (interrupted) |
      | user      | third         |

  @profile:barge-in @req:ADR0122-D2-02
  Scenario: Without barge-in a message sent mid-turn waits for the turn to finish
    Given barge-in is off
    And alice has started a conversation
    And the model calls "slow" with {}
    And the tool "slow" waits
    When alice sends "check the pumps"
    And the tool "slow" has been called 1 time
    And alice sends "and the valves?"
    And the tool "slow" is released
    Then turn 1 is answered "re: check the pumps"
    And turn 2 is answered "re: and the valves?"
    And the tool "slow" has been called 1 time in all
    And the model has been asked 3 times in all
    And request 3 to the model holds the messages:
      | role      | content             |
      | user      | check the pumps     |
      | assistant | re: check the pumps |
      | user      | and the valves?     |

  @profile:barge-in @req:ADR0122-D2-05 @configures
  Scenario: A retry of the running turn's own message does not interrupt it
    Given alice has started a conversation
    And the model replies "the pumps are fine" after a release
    When alice sends "check the pumps" with message id "m-7"
    And the model has been asked 1 time
    And alice sends "check the pumps" again with message id "m-7"
    And the model is released
    Then turn 1 is answered "the pumps are fine"
    When alice sends "thanks"
    Then turn 2 is answered "re: thanks"
    And the history holds:
      | ord | turn | role      | status   | text               |
      | 1   | 1    | user      | accepted | check the pumps    |
      | 2   | 1    | assistant | complete | the pumps are fine |
      | 3   | 2    | user      | accepted | thanks             |
      | 4   | 2    | assistant | complete | re: thanks         |
    And the model has been asked 2 times in all

  @profile:barge-in @req:ADR0122-D2-05 @crash @configures
  Scenario: A retry waiting for a turn that is re-run after a crash does not interrupt it
    Given alice has started a conversation
    And the model calls "slow" with {}
    And the tool "slow" waits
    When alice sends "check the pumps" with message id "m-7"
    And the tool "slow" has been called 1 time
    And alice sends "check the pumps" again with message id "m-7"
    And the system is killed and restarted
    Then turn 1 is answered "re: check the pumps"
    When alice sends "thanks"
    Then turn 2 is answered "re: thanks"
    And the history holds:
      | ord | turn | role      | status   | text                |
      | 1   | 1    | user      | accepted | check the pumps     |
      | 2   | 1    | assistant | complete | re: check the pumps |
      | 3   | 2    | user      | accepted | thanks              |
      | 4   | 2    | assistant | complete | re: thanks          |
    And the model has been asked 3 times in all
    And the tool "slow" has been called 2 times in all
    And every call to "slow" carried the same idempotency key
    And request 3 to the model holds the messages:
      | role      | content             |
      | user      | check the pumps     |
      | assistant | re: check the pumps |
      | user      | thanks              |

  @profile:barge-in @req:ADR0122-D2-07 @configures
  Scenario: Retries from an earlier generation still do not interrupt
    Given the conversation rotates every 1 turn
    And alice has started a conversation
    When alice sends "first" with message id "m-1"
    Then turn 1 is answered "re: first"
    Given the model calls "slow" with {}
    And the tool "slow" waits
    When alice sends "second" with message id "m-2"
    And the tool "slow" has been called 1 time
    And alice sends "first" again with message id "m-1"
    And the tool "slow" is released
    Then turn 2 is answered "re: second"
    When alice sends "last"
    Then turn 3 is answered "re: last"
    And the history holds:
      | ord | turn | role      | status   | text       |
      | 1   | 1    | user      | accepted | first      |
      | 2   | 1    | assistant | complete | re: first  |
      | 3   | 2    | user      | accepted | second     |
      | 4   | 2    | assistant | complete | re: second |
      | 5   | 3    | user      | accepted | last       |
      | 6   | 3    | assistant | complete | re: last   |
    And the model has been asked 4 times in all

  @profile:barge-in @req:ADR0122-D2-08 @configures
  Scenario: A tool call in flight completes and nothing further is issued
    Given alice has started a conversation
    And the model calls at once:
      | tool   | arguments |
      | slow   | {}        |
      | lookup | {}        |
    And the tool "slow" waits
    And the tool "lookup" answers {"found": true}
    When alice sends "inspect everything"
    And the tool "slow" has been called 1 time
    And alice sends "never mind"
    And the tool "slow" is released
    Then turn 1 is interrupted with partial ""
    And turn 2 is answered "re: never mind"
    And the tool "slow" has been called 1 time in all
    And the tool "lookup" was never called
    And the model has been asked 2 times in all
    And request 2 to the model holds the messages:
      | role      | content            |
      | user      | inspect everything |
      | assistant | (interrupted)      |
      | user      | never mind         |

  @profile:barge-in @req:ADR0122-D2-10 @configures
  Scenario: Interrupted and failed turns stay in the model's context as placeholders
    Given alice has started a conversation
    And the model waits before answering
    And the model fails every call about "two" with status 500 and says "upstream exploded"
    When alice sends "one"
    And the model has been asked 1 time
    And alice sends "two"
    Then turn 1 is interrupted with partial ""
    And turn 2 fails with reason "model-error"
    When alice sends "three"
    Then turn 3 is answered "re: three"
    And every request to the model for "three" holds the messages:
      | role      | content                        |
      | user      | one                            |
      | assistant | (interrupted)                  |
      | user      | two                            |
      | assistant | (no reply: the request failed) |
      | user      | three                          |

  @profile:barge-in @req:ADR0122-D2-11 @crash @configures
  Scenario: An interrupted dialogue replays after a crash without asking the model again
    Given alice has started a conversation
    And the model waits before answering
    When alice sends "one"
    And the model has been asked 1 time
    And alice sends "two"
    Then turn 2 is answered "re: two"
    And alice remembers the history
    When the system is killed and restarted
    Then the history is the remembered one, byte for byte
    When alice sends "three"
    Then turn 3 is answered "re: three"
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text      |
      | 5   | 3    | user      | accepted | three     |
      | 6   | 3    | assistant | complete | re: three |
    And the model has been asked 3 times in all
    And request 3 to the model holds the messages:
      | role      | content       |
      | user      | one           |
      | assistant | (interrupted) |
      | user      | two           |
      | assistant | re: two       |
      | user      | three         |

  @profile:barge-in @req:ADR0122-D2-12 @crash @configures
  Scenario: A message that arrived before a crash still interrupts after recovery
    Given alice has started a conversation
    And the model calls "slow" with {}
    And the tool "slow" waits
    When alice sends "first"
    And the tool "slow" has been called 1 time
    And alice sends "second"
    And the system is killed and restarted
    Then turn 1 is interrupted with partial ""
    And turn 2 is answered "re: second"
    And the model has been asked 2 times in all
    And the tool "slow" has been called 2 times in all
    And every call to "slow" carried the same idempotency key
    And request 2 to the model holds the messages:
      | role      | content       |
      | user      | first         |
      | assistant | (interrupted) |
      | user      | second        |
    And the history holds:
      | ord | turn | role      | status      | text       |
      | 1   | 1    | user      | accepted    | first      |
      | 2   | 1    | assistant | interrupted |            |
      | 3   | 2    | user      | accepted    | second     |
      | 4   | 2    | assistant | complete    | re: second |

  @profile:barge-in @req:ADR0122-D2-04 @crash @configures
  Scenario: A waiting message is noticed however much tool traffic the turn produced
    Given the setting "conversation.maxIterations" is 100
    And alice has started a conversation
    And the model calls "lookup" 40 times in a row
    And the model calls "slow" with {}
    And the tool "lookup" answers {"found": true}
    And the tool "slow" waits
    When alice sends "first"
    And the tool "slow" has been called 1 time
    And alice sends "second"
    And the system is killed and restarted
    Then turn 1 is interrupted with partial ""
    And turn 2 is answered "re: second"
    And the tool "lookup" has been called 40 times in all
    And the tool "slow" has been called 2 times in all
    And every call to "slow" carried the same idempotency key
    And the model has been asked 42 times in all

  @profile:barge-in @req:ADR0121-D3-01 @crash @configures
  Scenario: An interruption at a tool checkpoint is replayed, not re-decided
    Given alice has started a conversation
    And the model calls at once:
      | tool   | arguments |
      | slow   | {}        |
      | lookup | {}        |
    And the tool "slow" waits
    When alice sends "inspect everything"
    And the tool "slow" has been called 1 time
    And alice sends "never mind"
    And the tool "slow" is released
    Then turn 2 is answered "re: never mind"
    And alice remembers the history
    When the system is killed and restarted
    And alice sends "and now?"
    Then turn 3 is answered "re: and now?"
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text         |
      | 5   | 3    | user      | accepted | and now?     |
      | 6   | 3    | assistant | complete | re: and now? |
    And the tool "lookup" was never called
    And the tool "slow" has been called 1 time in all
    And the model has been asked 3 times in all
    And request 3 to the model holds the messages:
      | role      | content            |
      | user      | inspect everything |
      | assistant | (interrupted)      |
      | user      | never mind         |
      | assistant | re: never mind     |
      | user      | and now?           |

  @profile:barge-in @req:ADR0121-D4-03 @configures
  Scenario: An interrupted turn writes nothing back to memory
    Given the agent has memory
    And alice has started a conversation
    And the model streams "Let me" and waits
    When alice sends "check the pumps"
    And alice's stream shows "Let me"
    And alice sends "stop, check the valves"
    Then turn 1 is interrupted with partial "Let me"
    And turn 2 is answered "re: stop, check the valves"
    Given the model replies "noted"
    When alice sends "that is all"
    Then turn 3 is answered "noted"
    And alice's memory held exactly, when the turn "that is all" recalled it:
      | role      | text                       |
      | user      | stop, check the valves     |
      | assistant | re: stop, check the valves |

  @profile:barge-in @req:ADR0122-D2-13
  Scenario: A conversation that would need tool approvals is refused at construction
    Given the tool "drop-table" needs approval
    Then the system refuses to start
