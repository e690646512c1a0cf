Feature: A run's model calls are cached per principal and scope, capped, and bounded in time
  As an agent builder
  I want the engine's response cache never to hand one tenant's answer to another, a response
  too big to record never to be half-recorded, and a stalled model or tool never to hang a run
  So that caching, the journal's cap and the timeouts are safe to turn on

  The response cache is the engine's (model.responseCache in the configuration). It answers a
  request as written, so the kit sees it as fewer requests of one shape; it is partitioned by the
  run's principal (the whole identity) and by the run's cacheScope, which a run must then name.

  @profile:agent @req:ADR0121-D5-03 @configures
  Scenario Outline: With the cache on, a run that names no cache scope is refused by name, and nothing starts (<options>)
    Given the system caches model responses
    Then alice starting a run with <options> is refused naming "cacheScope"
    And the model has been asked 0 times in all

    Examples:
      | options                                 |
      | {"prompt": "hi"}                        |
      | {"prompt": "hi", "cacheScope": ""}      |
      | {"prompt": "hi", "cacheScope": 7}       |
      | {"prompt": "hi", "cacheScope": null}    |

  @profile:agent @req:ADR0121-D5-04 @configures
  Scenario Outline: The same question of the same principal in the same scope asks the model once (then <who>)
    Given the system caches model responses
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme"}
      """
    Then the run ends completed
    When <who> starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme"}
      """
    Then the run ends completed
    And the run's output is "re: check pump 3"
    And the model has been asked 1 time in all
    And the question of request 1 to the model was asked 1 time in all

    Examples:
      | who                 |
      | alice               |
      | alice's other token |

  @profile:agent @req:ADR0121-D5-11 @configures
  Scenario: A model call that failed part way is not kept, so the same question asks the model again
    Given the system caches model responses
    And the model streams "Pump 3 is" then fails with status 500
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme"}
      """
    Then the run ends failed
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme"}
      """
    Then the run ends completed
    And the run's output is "re: check pump 3"
    And the model has been asked 2 times in all
    And request 2 to the model holds the same messages as request 1

  @profile:agent @req:ADR0121-D5-11 @configures
  Scenario: A model call cut off by an abort is not kept, so the same question asks the model again
    Given the system caches model responses
    And the model streams "Pump 3 is" and waits
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme"}
      """
    And the model has streamed its first words
    And alice aborts the run
    Then the run ends aborted
    And the run was interrupted with "Pump 3 is" after 1 model call, having completed nothing
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme"}
      """
    Then the run ends completed
    And the run's output is "re: check pump 3"
    And the model has been asked 2 times in all
    And request 2 to the model holds the same messages as request 1

  @profile:agent @req:ADR0121-D5-05 @configures
  Scenario Outline: A principal that differs in one identity field alone asks the model itself (<who>)
    Given the system caches model responses
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme"}
      """
    Then the run ends completed
    When <who> starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme"}
      """
    Then the run ends completed
    And the run's output is "re: check pump 3"
    And the model has been asked 2 times in all
    And the question of request 1 to the model was asked 2 times in all

    Examples:
      | who                    |
      | alice at evil          |
      | alice without a tenant |
      | alice for bob          |
      | bob                    |

  @profile:agent @req:ADR0121-D5-06 @configures
  Scenario: The same question of the same principal in another cache scope asks the model again
    Given the system caches model responses
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "team-a"}
      """
    Then the run ends completed
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "team-b"}
      """
    Then the run ends completed
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "team-a"}
      """
    Then the run ends completed
    And the model has been asked 2 times in all
    And the question of request 1 to the model was asked 2 times in all

  @profile:agent @req:ADR0121-D5-07 @configures
  Scenario: A cached answer is the question as written: another prompt asks the model
    Given the system caches model responses
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme"}
      """
    Then the run ends completed
    When alice starts a run with:
      """
      {"prompt": "check pump 4", "cacheScope": "acme"}
      """
    Then the run ends completed
    And the run's output is "re: check pump 4"
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D5-07 @configures
  Scenario: A cached answer is the question as written: other tools offered ask the model
    Given the system caches model responses
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme", "tools": ["lookup"]}
      """
    Then the run ends completed
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme", "tools": ["north"]}
      """
    Then the run ends completed
    And the run's output is "re: check pump 3"
    And the model has been asked 2 times in all
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme", "tools": ["lookup"]}
      """
    Then the run ends completed
    And the run's output is "re: check pump 3"
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D5-07
  Scenario: Without the cache every run asks the model, a cache scope or not
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme"}
      """
    Then the run ends completed
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "cacheScope": "acme"}
      """
    Then the run ends completed
    When alice starts a run with:
      """
      {"prompt": "check pump 3"}
      """
    Then the run ends completed
    And the model has been asked 3 times in all
    And the question of request 1 to the model was asked 3 times in all

  @profile:agent @req:ADR0121-D5-08
  Scenario Outline: A run's answer up to the cap is kept whole, and one over it is cut with the marker (<chars> characters)
    Given the model replies "zoë says: " filled to <chars> characters
    When alice starts a run with:
      """
      {"prompt": "write it all"}
      """
    Then the run ends completed
    And the run's output is "zoë says: " filled to <kept> characters, <how>

    Examples:
      | chars  | kept   | how   |
      | 262143 | 262143 | whole |
      | 262144 | 262144 | whole |
      | 262145 | 262144 | cut   |
      | 300000 | 262144 | cut   |

  @profile:agent @req:ADR0121-D5-08
  Scenario Outline: The cap counts code points, whatever their width in bytes or UTF-16 units (<what>, <chars> characters)
    Given the model replies "<text>" filled to <chars> characters
    When alice starts a run with:
      """
      {"prompt": "write it all"}
      """
    Then the run ends completed
    And the run's output is "<text>" filled to <kept> characters, <how>

    Examples:
      | what                    | text               | chars  | kept   | how   |
      | emoji                   | 😀 says: 😀😀😀    | 262144 | 262144 | whole |
      | emoji                   | 😀 says: 😀😀😀    | 262145 | 262144 | cut   |
      | three-byte characters   | 中文 says: 中文中文 | 262144 | 262144 | whole |
      | three-byte characters   | 中文 says: 中文中文 | 262145 | 262144 | cut   |

  @profile:agent @req:ADR0121-D5-09 @crash
  Scenario: A cut answer is the same after a restart, and the model is not asked again
    Given the model replies "long: " filled to 262145 characters
    When alice starts a run with:
      """
      {"prompt": "write it all"}
      """
    Then the run ends completed
    And the run's output is "long: " filled to 262144 characters, cut
    When the system is killed and restarted
    Then the run reads exactly as when it ended
    And the run's output is "long: " filled to 262144 characters, cut
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D5-10
  Scenario Outline: Tool calls over the cap fail the run by its typed reason and nothing of them runs (<chars> characters)
    Given the model calls "store" with {"k": 1} filled to <chars> characters
    And the tool "store" answers {"stored": true}
    And the model replies "Stored."
    When alice starts a run with:
      """
      {"prompt": "store it"}
      """
    Then the run ends <status>
    And the tool "store" has been called <calls> times in all
    And the model has been asked <asked> times in all

    Examples:
      | chars  | status    | calls | asked |
      | 262144 | completed | 1     | 2     |
      | 262145 | failed    | 0     | 1     |

  @profile:agent @req:ADR0121-D5-10
  Scenario Outline: Tool calls' arguments are measured in code points, not bytes or UTF-16 units (<chars> characters)
    Given the model calls "store" with {"k": "😀 中 é 😀"} filled to <chars> characters
    And the tool "store" answers {"stored": true}
    And the model replies "Stored."
    When alice starts a run with:
      """
      {"prompt": "store it"}
      """
    Then the run ends <status>
    And the tool "store" has been called <calls> times in all
    And the model has been asked <asked> times in all

    Examples:
      | chars  | status    | calls | asked |
      | 262144 | completed | 1     | 2     |
      | 262145 | failed    | 0     | 1     |

  @profile:agent @req:ADR0121-D5-10 @crash
  Scenario: A run failed by tool calls over the cap logs none of them, and stays failed after a restart
    Given the model calls "store" with {"k": 1} filled to 262145 characters
    And the tool "store" answers {"stored": true}
    When alice starts a run with:
      """
      {"prompt": "store it"}
      """
    Then the run ends failed
    And the run's reason is "response-too-large"
    And the run's tool-call log is empty
    And the run has no interrupted payload
    When the system is killed and restarted
    Then the run reads exactly as when it ended
    And the tool "store" was never called
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D3-05
  Scenario: A timeout of 86 400 000 milliseconds, the most, is taken, and so is one of 1
    Given the model replies "first"
    When alice starts a run with:
      """
      {"prompt": "hi", "turnTimeoutMs": 86400000, "toolTimeoutMs": 86400000}
      """
    Then the run ends completed
    And the run's output is "first"
    Given the model replies "second"
    When alice starts a run with:
      """
      {"prompt": "hi", "turnTimeoutMs": 86400000, "toolTimeoutMs": 1}
      """
    Then the run ends completed
    And the run's output is "second"
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D3-05
  Scenario Outline: A timeout that is not a positive number of milliseconds is refused by name, and nothing starts
    Then alice starting a run with <options> is refused naming "<field>"
    And the model has been asked 0 times in all

    Examples:
      | options                                        | field         |
      | {"prompt": "hi", "turnTimeoutMs": 0}           | turnTimeoutMs |
      | {"prompt": "hi", "turnTimeoutMs": -5}          | turnTimeoutMs |
      | {"prompt": "hi", "turnTimeoutMs": "300"}       | turnTimeoutMs |
      | {"prompt": "hi", "turnTimeoutMs": 2.5}         | turnTimeoutMs |
      | {"prompt": "hi", "turnTimeoutMs": 86400001}    | turnTimeoutMs |
      | {"prompt": "hi", "toolTimeoutMs": 0}           | toolTimeoutMs |
      | {"prompt": "hi", "toolTimeoutMs": true}        | toolTimeoutMs |
      | {"prompt": "hi", "toolTimeoutMs": 86400001}    | toolTimeoutMs |

  @profile:agent @req:ADR0121-D3-06
  Scenario: A model call that runs out of turnTimeoutMs is aborted and fails the run by its reason
    Given the model waits before answering
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "turnTimeoutMs": 300}
      """
    Then the run ends failed within 2000 ms of the first request to the model
    And the run's reason is "turn-timeout"
    And request 1 to the model was aborted by the system
    And the run's tool-call log is empty
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D3-06
  Scenario: A model that answers within turnTimeoutMs completes the run
    Given the model calls "lookup" with {"pump": 3}
    And the tool "lookup" answers {"pressure": 7}
    And the model replies "Pump 3 is at 7 bar."
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "turnTimeoutMs": 3000, "toolTimeoutMs": 3000}
      """
    Then the run ends completed
    And the run's output is "Pump 3 is at 7 bar."
    And the run's tool-call log is:
      | name   | arguments  | ok   | result         |
      | lookup | {"pump":3} | true | {"pressure":7} |

  @profile:agent @req:ADR0121-D3-07
  Scenario Outline: A tool call that runs out of toolTimeoutMs is aborted and fed back as an error result (<with>)
    Given the model calls "lookup" with {"pump": 3}
    And the tool "lookup" waits
    And the model replies "The lookup timed out."
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "toolTimeoutMs": 300<options>}
      """
    Then the run ends completed within 2000 ms of the first call of the tool "lookup"
    And the run's output is "The lookup timed out."
    And the tool "lookup" was called and its request was aborted
    And the run's tool-call log is:
      | name   | arguments  | ok    | result    |
      | lookup | {"pump":3} | false | timed out |
    And request 2 to the model holds a tool error for "lookup"
    And the model has been asked 2 times in all

    Examples:
      | with                           | options                              |
      | no approval rule               |                                      |
      | an approval rule that lets run | , "needsApproval": {"lookup": false} |

  @profile:agent @req:ADR0121-D3-07
  Scenario: With toolErrors fail a tool call out of time ends the run with no further model call
    Given the model calls "lookup" with {"pump": 3}
    And the tool "lookup" waits
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "toolTimeoutMs": 300, "toolErrors": "fail"}
      """
    Then the run ends failed within 2000 ms of the first call of the tool "lookup"
    And the run's reason is "tool-failed"
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D3-07
  Scenario: Each tool call of a response has its own toolTimeoutMs, counted from its own start
    # The calls run one after the other: north starts when lookup has answered, 1500 ms in, and
    # has its own 2000 ms from then, so it is still in time 1000 ms later (2500 ms after lookup began).
    Given the model calls at once:
      | tool   | arguments  |
      | lookup | {"pump":3} |
      | north  | {}         |
    And the tool "lookup" waits
    And the tool "north" waits
    And the model replies "Both answered."
    When alice starts a run with:
      """
      {"prompt": "check pump 3 and the north zone", "toolTimeoutMs": 2000}
      """
    And the tool "lookup" has been waiting 1500 ms
    And the tool "lookup" is released
    And the tool "north" has been waiting 1000 ms
    And the tool "north" is released
    Then the run ends completed
    And the run's output is "Both answered."
    And the run's tool-call log is:
      | name   | arguments  | ok   | result       |
      | lookup | {"pump":3} | true | {"ok": true} |
      | north  | {}         | true | {"ok": true} |
    And the model has been asked 2 times in all

  @profile:agent @req:ADR0121-D3-08 @crash
  Scenario: A tool call a crash cut off resumes its countdown after the restart instead of starting it again
    Given the model calls "lookup" with {"pump": 3}
    And the tool "lookup" waits
    And the tool "lookup" waits
    And the model replies "The lookup timed out."
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "toolTimeoutMs": 6000}
      """
    And the tool "lookup" has been waiting 4500 ms
    And the system is killed and restarted
    Then the run ends completed within 9000 ms of the first call of the tool "lookup"
    And the run's tool-call log is:
      | name   | arguments  | ok    | result    |
      | lookup | {"pump":3} | false | timed out |

  @profile:agent @req:ADR0121-D3-09 @crash
  Scenario: A model call a crash cut off resumes its countdown after the restart instead of starting it again
    Given the model waits before answering
    And the model waits before answering
    When alice starts a run with:
      """
      {"prompt": "check pump 3", "turnTimeoutMs": 6000}
      """
    And the first request to the model has been waiting 4500 ms
    And the system is killed and restarted
    Then the run ends failed within 9000 ms of the first request to the model
    And the run's reason is "turn-timeout"
