Feature: A turn runs the canonical agent loop
  As an agent builder
  I want tool failures to reach the model and every step of a turn to survive a crash
  So that the model can recover from a failing tool and no tool runs twice by accident

  A turn asks the model, runs the tools it asks for, feeds their results back (a failure becomes
  an error result the model can read, fenced as untrusted data) and repeats until the model answers. Every tool call is a
  journaled step: a completed call is never run again, and a call that was in flight at a crash
  runs again with the same idempotency key, unless its tool is declared idempotent: false. Such a
  call is in doubt: it is not run again, and the turn fails with reason effect-in-doubt, never
  feeding the doubt to the model.

  @profile:agent @req:ADR0121-D1-01 @configures
  Scenario: A failing tool is fed back to the model and the turn goes on
    Given alice has started a conversation
    And the model calls "lookup" with {"pump": 3}
    And the tool "lookup" fails with status 500 and says "sensor offline"
    And the model replies "The sensor is offline; I could not check pump 3."
    When alice sends "check pump 3"
    Then turn 1 is answered "The sensor is offline; I could not check pump 3."
    And request 2 to the model holds a tool result that says "sensor offline"
    And request 2 to the model holds the messages:
      | role      | content                                                                                          |
      | user      | check pump 3                                                                                     |
      | assistant | [calls lookup {"pump":3}]                                                                        |
      | tool      | {"untrusted": {"source": "tool-error:lookup", "data": {"error": "sensor offline"}}} [for lookup] |
    And the tool "lookup" has been called 1 time in all
    And every call to "lookup" carried the arguments {"pump": 3}
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D1-02 @crash @configures
  Scenario: A tool failure the model already read is not run again after a crash
    Given alice has started a conversation
    And the model calls "lookup" with {"pump": 3}
    And the tool "lookup" fails with status 500 and says "sensor offline"
    And the model replies "The sensor is offline."
    When alice sends "check pump 3"
    Then turn 1 is answered "The sensor is offline."
    And alice remembers the history
    When the system is killed and restarted
    And alice sends "thanks"
    Then turn 2 is answered "re: thanks"
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text       |
      | 3   | 2    | user      | accepted | thanks     |
      | 4   | 2    | assistant | complete | re: thanks |
    And the tool "lookup" has been called 1 time in all
    And the model has been asked 3 times in all
    And request 3 to the model holds the messages:
      | role      | content                |
      | user      | check pump 3           |
      | assistant | The sensor is offline. |
      | user      | thanks                 |

  @profile:agent @req:ADR0121-D1-03 @crash @configures
  Scenario: A tool call in flight at a crash runs again with the same idempotency key
    Given alice has started a conversation
    And the model calls "transfer" with {"amount": 10}
    And the tool "transfer" waits
    And the tool "transfer" answers {"done": true}
    When alice sends "pay the invoice"
    And the tool "transfer" has been called 1 time
    And the system is killed and restarted
    Then turn 1 is answered "re: pay the invoice"
    And the tool "transfer" has been called 2 times in all
    And every call to "transfer" carried the same idempotency key
    And every call to "transfer" carried the arguments {"amount": 10}
    And the model has been asked 2 times in all
    And request 2 to the model holds the messages:
      | role      | content                        |
      | user      | pay the invoice                |
      | assistant | [calls transfer {"amount":10}] |
      | tool      | {"done": true} [for transfer]  |

  @profile:agent @req:ADR0121-D1-25
  Scenario: The same call in a later turn is another call, under a key of its own, with its own answer
    Given alice has started a conversation
    And the model calls "lookup" with {"pump": 3}
    And the next call of the tool "lookup" answers {"pressure": 7}
    When alice sends "check pump 3"
    Then turn 1 is answered "re: check pump 3"
    Given the model calls "lookup" with {"pump": 3}
    And the next call of the tool "lookup" answers {"pressure": 9}
    When alice sends "check pump 3 again"
    Then turn 2 is answered "re: check pump 3 again"
    And the tool "lookup" has been called 2 times in all
    And every call to "lookup" carried an idempotency key of its own
    And request 4 to the model holds the messages:
      | role      | content                      |
      | user      | check pump 3                 |
      | assistant | re: check pump 3             |
      | user      | check pump 3 again           |
      | assistant | [calls lookup {"pump":3}]    |
      | tool      | {"pressure": 9} [for lookup] |

  @profile:agent @req:ADR0121-D1-24 @crash @configures
  Scenario: A call of a tool declared not idempotent in flight at a crash is in doubt, never run again
    Given the tool "transfer" is declared not idempotent
    And alice has started a conversation
    And the model calls "transfer" with {"amount": 10}
    And the tool "transfer" waits
    And the model replies "never asked"
    When alice sends "pay the invoice"
    And the tool "transfer" has been called 1 time
    And the system is killed and restarted
    Then turn 1 fails with reason "effect-in-doubt"
    And the history holds:
      | ord | turn | role      | status   | text            | reason          |
      | 1   | 1    | user      | accepted | pay the invoice |                 |
      | 2   | 1    | assistant | failed   | -               | effect-in-doubt |
    And the tool "transfer" has been called 1 time in all
    And every call to "transfer" carried the arguments {"amount": 10}
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D1-24 @crash @configures
  Scenario: A restart after the call in doubt is recorded changes nothing
    Given the tool "transfer" is declared not idempotent
    And alice has started a conversation
    And the model calls "transfer" with {"amount": 10}
    And the tool "transfer" waits
    When alice sends "pay the invoice"
    And the tool "transfer" has been called 1 time
    And the system is killed and restarted
    Then turn 1 fails with reason "effect-in-doubt"
    And alice remembers the history
    When the system is killed and restarted
    And alice sends "thanks"
    Then turn 2 is answered "re: thanks"
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text       |
      | 3   | 2    | user      | accepted | thanks     |
      | 4   | 2    | assistant | complete | re: thanks |
    And the error hook was told about the call in doubt of turn 1 once, under its error id, naming "transfer" and the idempotency key of its call 1
    And the tool "transfer" has been called 1 time in all
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D1-24 @crash @configures
  Scenario: Of a parallel batch cut off by a crash, the undeclared call runs again and the declared one is in doubt
    Given the setting "conversation.parallelTools" is true
    And the tool "transfer" is declared not idempotent
    And alice has started a conversation
    And the model calls at once:
      | tool     | arguments     |
      | transfer | {"amount":10} |
      | lookup   | {"pump":3}    |
    And the tool "transfer" waits
    And the tool "lookup" waits
    And the tool "lookup" answers {"pressure": 7}
    And the model replies "never asked"
    When alice sends "pay and look"
    And the tool "transfer" has been called 1 time
    And the tool "lookup" has been called 1 time
    And the system is killed and restarted
    Then turn 1 fails with reason "effect-in-doubt"
    And the history holds:
      | ord | turn | role      | status   | text         | reason          |
      | 1   | 1    | user      | accepted | pay and look |                 |
      | 2   | 1    | assistant | failed   | -            | effect-in-doubt |
    And the tool "transfer" has been called 1 time in all
    And the tool "lookup" has been called 2 times in all
    And every call to "lookup" carried the same idempotency key
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D1-24 @crash @configures
  Scenario: One after the other, the calls after the one in doubt are not run
    Given the tool "transfer" is declared not idempotent
    And alice has started a conversation
    And the model calls at once:
      | tool     | arguments     |
      | transfer | {"amount":10} |
      | lookup   | {"pump":3}    |
    And the tool "transfer" waits
    And the tool "lookup" answers {"pressure": 7}
    And the model replies "never asked"
    When alice sends "pay and look"
    And the tool "transfer" has been called 1 time
    And the system is killed and restarted
    Then turn 1 fails with reason "effect-in-doubt"
    And the history holds:
      | ord | turn | role      | status   | text         | reason          |
      | 1   | 1    | user      | accepted | pay and look |                 |
      | 2   | 1    | assistant | failed   | -            | effect-in-doubt |
    And the tool "transfer" has been called 1 time in all
    And the tool "lookup" was never called
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D2-14 @crash @configures
  Scenario Outline: A turn cut off by a crash resumes from its journal after parallelTools changed from <before> to <after>
    Both ways of running one response's calls record them alike, so the restarted system serves
    every call and answer the journal holds and asks again only for what the crash cut off.

    Given the setting "conversation.parallelTools" is <before>
    And alice has started a conversation
    And the model calls at once:
      | tool  | arguments  |
      | north | {"zone":1} |
      | south | {"zone":2} |
    And the tool "north" answers {"zone": "north ok"}
    And the tool "south" answers {"zone": "south ok"}
    And the model streams "Both zones" and waits
    When alice sends "check both zones"
    And the model has been asked 2 times
    And the system is killed and restarted with the setting "conversation.parallelTools" at <after>
    Then turn 1 is answered "re: check both zones"
    And the history holds:
      | ord | turn | role      | status   | text                  |
      | 1   | 1    | user      | accepted | check both zones      |
      | 2   | 1    | assistant | complete | re: check both zones  |
    And the tool "north" has been called 1 time in all
    And the tool "south" has been called 1 time in all
    And the model has been asked 3 times in all
    And request 3 to the model holds the same messages as request 2
    And request 2 to the model holds the messages:
      | role      | content                                    |
      | user      | check both zones                           |
      | assistant | [calls north {"zone":1}, south {"zone":2}] |
      | tool      | {"zone": "north ok"} [for north]           |
      | tool      | {"zone": "south ok"} [for south]           |

    Examples:
      | before | after |
      | true   | false |
      | false  | true  |

  @profile:agent @req:ADR0121-D2-01 @configures
  Scenario: Parallel tool calls run together and come back in the model's order
    Given the setting "conversation.parallelTools" is true
    And alice has started a conversation
    And the model calls at once:
      | tool  | arguments  |
      | north | {"zone":1} |
      | south | {"zone":2} |
    And the tool "north" waits
    And the tool "north" answers {"zone": "north ok"}
    And the tool "south" answers {"zone": "south ok"}
    When alice sends "check both zones"
    And the tool "south" answered 1 time
    And the tool "north" is released
    Then turn 1 is answered "re: check both zones"
    And request 2 to the model holds the tool results in the order north, south
    And request 2 to the model holds the messages:
      | role      | content                                    |
      | user      | check both zones                           |
      | assistant | [calls north {"zone":1}, south {"zone":2}] |
      | tool      | {"ok": true} [for north]                   |
      | tool      | {"zone": "south ok"} [for south]           |
    And the tool "north" has been called 1 time in all
    And the tool "south" has been called 1 time in all

  @profile:agent @req:ADR0121-D4-01 @configures
  Scenario: A completed turn writes its prompt and its answer back to the asker's memory, once
    Given the agent has memory
    And alice has started a conversation
    When alice sends "check pump 3"
    Then turn 1 is answered "re: check pump 3"
    Given the model replies "pump 4 is fine"
    When alice sends "and pump 4?"
    Then turn 2 is answered "pump 4 is fine"
    And alice's memory held exactly, when the turn "and pump 4?" recalled it:
      | role      | text             |
      | user      | check pump 3     |
      | assistant | re: check pump 3 |
    Given the model replies "noted"
    When alice sends "that is all"
    Then turn 3 is answered "noted"
    And alice's memory held exactly, when the turn "that is all" recalled it:
      | role      | text             |
      | user      | check pump 3     |
      | assistant | re: check pump 3 |
      | user      | and pump 4?      |
      | assistant | pump 4 is fine   |

  @profile:agent @req:ADR0121-D4-01 @configures
  Scenario: Two turns with the same prompt and the same answer are two write-backs, both remembered
    Given the agent has memory
    And alice has started a conversation
    And the model replies "pump 3 is fine"
    When alice sends "check pump 3"
    Then turn 1 is answered "pump 3 is fine"
    Given the model replies "pump 3 is fine"
    When alice sends "check pump 3"
    Then turn 2 is answered "pump 3 is fine"
    Given the model replies "noted"
    When alice sends "that is all"
    Then turn 3 is answered "noted"
    And alice's memory held exactly, when the turn "that is all" recalled it:
      | role      | text             |
      | user      | check pump 3     |
      | assistant | pump 3 is fine   |
      | user      | check pump 3     |
      | assistant | pump 3 is fine   |
    And alice's memory scope holds exactly:
      | role      | text             | tainted |
      | user      | check pump 3     | false   |
      | assistant | pump 3 is fine   | false   |
      | user      | check pump 3     | false   |
      | assistant | pump 3 is fine   | false   |
      | user      | that is all      | false   |
      | assistant | noted            | false   |

  @profile:agent @req:ADR0121-D4-25 @configures
  Scenario Outline: A turn's answer is remembered tainted when the turn was fed a tool's error text (<tool>)
    Given the agent has memory
    And alice has started a conversation
    And the model calls "lookup" with {"pump": 3}
    And <tool>
    And the model replies "pump 3 checked"
    When alice sends "check pump 3"
    Then turn 1 is answered "pump 3 checked"
    And alice's memory scope holds exactly:
      | role      | text           | tainted   |
      | user      | check pump 3   | false     |
      | assistant | pump 3 checked | <tainted> |

    Examples:
      | tool                                                          | tainted |
      | the tool "lookup" fails with status 502 and says "sensor off" | true    |
      | the tool "lookup" answers {"pressure": 7}                     | false   |

  @profile:agent @req:ADR0121-D4-01 @crash @configures
  Scenario: A write-back survives a crash without being written twice
    Given the agent has memory
    And alice has started a conversation
    When alice sends "check pump 3"
    Then turn 1 is answered "re: check pump 3"
    When the system is killed and restarted
    Given the model replies "you are welcome"
    When alice sends "thanks"
    Then turn 2 is answered "you are welcome"
    Given the model replies "noted"
    When alice sends "that is all"
    Then turn 3 is answered "noted"
    And alice's memory held exactly, when the turn "that is all" recalled it:
      | role      | text             |
      | user      | check pump 3     |
      | assistant | re: check pump 3 |
      | user      | thanks           |
      | assistant | you are welcome  |

  @profile:agent @req:ADR0121-D4-01 @crash @configures
  Scenario: A turn's write-back a crash cut off is made again under the same ids, and the scope holds it once
    Given the agent has memory
    And the memory's writes wait
    And alice has started a conversation
    When alice sends "check pump 3"
    And the memory has been written 1 time
    And the system is killed and restarted
    And the memory has been written 2 times
    And the memory's writes are released
    Then turn 1 is answered "re: check pump 3"
    And alice's memory scope holds exactly:
      | role      | text             | tainted |
      | user      | check pump 3     | false   |
      | assistant | re: check pump 3 | false   |
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D4-02 @configures
  Scenario: A failed turn writes nothing back
    Given the agent has memory
    And the model fails every call about "check pump 3" with status 500 and says "upstream exploded"
    And alice has started a conversation
    When alice sends "check pump 3"
    Then turn 1 fails with reason "model-error"
    When alice sends "thanks"
    Then turn 2 is answered "re: thanks"
    Given the model replies "noted"
    When alice sends "that is all"
    Then turn 3 is answered "noted"
    And alice's memory held exactly, when the turn "that is all" recalled it:
      | role      | text       |
      | user      | thanks     |
      | assistant | re: thanks |

  @profile:agent @req:ADR0121-D1-01 @configures
  Scenario Outline: A failing tool's message reaches the model cut to its first 2 000 characters (<what>)
    Given alice has started a conversation
    And the model calls "lookup" with {"pump": 3}
    And the tool "lookup" fails with status 500 and says <n> characters of "x" and then "<tail>"
    When alice sends "check pump 3"
    Then turn 1 is answered "re: check pump 3"
    And request 2 to the model holds that tool message cut to 2000 characters

    Examples:
      | what                                            | n    | tail |
      | 2 000 characters, whole                         | 2000 |      |
      | 2 001 characters                                | 2001 |      |
      | a two-byte character as the 2 000th, whole      | 1999 | é    |
      | a two-byte character as the 2 001st             | 2000 | é    |

  @profile:agent @req:ADR0121-D1-01
  Scenario: A call to a tool that was never declared is refused without reaching the tool server
    Given alice has started a conversation
    And the model calls "teleport" with {"to": "mars"}
    When alice sends "beam me up"
    Then turn 1 is answered "re: beam me up"
    And the tool "teleport" was never called
    And request 2 to the model holds a tool error for "teleport"

  @profile:agent @req:ADR0121-D1-04 @configures
  Scenario Outline: A turn asks the model at most maxIterations times (setting <setting>, <calls> tool rounds)
    Given the setting "conversation.maxIterations" is <setting>
    And alice has started a conversation
    And the model calls "lookup" <calls> times in a row
    And the tool "lookup" answers {"found": true}
    When alice sends "look it all up"
    Then <outcome>
    And the model has been asked <asked> times in all
    When alice sends "still there?"
    Then turn 2 is answered "re: still there?"

    # 0 leaves the setting out: the documented default, 8.
    Examples:
      | setting | calls | asked | outcome                                |
      | 3       | 2     | 3     | turn 1 is answered "re: look it all up" |
      | 3       | 3     | 3     | turn 1 fails with reason "turn-failed"  |
      | 0       | 7     | 8     | turn 1 is answered "re: look it all up" |
      | 0       | 8     | 8     | turn 1 fails with reason "turn-failed"  |

  @profile:agent @req:ADR0121-D4-04 @configures
  Scenario: Recalled memory reaches the model fenced inside the prompt's user message
    Given the agent has memory
    And alice's memory holds "pump 7 runs hot"
    And alice's memory holds "it was patched\non Monday"
    And alice has started a conversation
    Given the model replies "noted"
    When alice sends "check pump 7"
    Then turn 1 is answered "noted"
    And request 1 to the model holds the messages:
      | role | content                                                                                            |
      | user | <recalled-memory>\n- pump 7 runs hot\n- it was patched on Monday\n</recalled-memory>\ncheck pump 7 |
