Feature: A run's terminal tool failures: denials, stops and quotas end the run
  As an operator of agents that call tools on someone's behalf
  I want a failure the model cannot fix to stop the run at once
  So that a denial, a safety stop or a quota is never turned into a prompt the model spins on

  A typed failure whose class is terminal (or extends a terminal class), or that says retryable
  false, ends the run failed with reason tool-terminal and no further model call; so does one
  whose cause, at most 5 deep, is terminal. A deeper cause is an ordinary failure, fed back. A
  terminal failure also stops the rest of its response: a sibling in flight is aborted and a call
  still waiting for a slot is never started.

  @profile:agent @req:ADR0121-D1-10
  Scenario Outline: An authority denial raised by a tool ends the run and is never fed back (<class><extends>)
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "<class>", "extends": <extends>, "message": "not granted"}
    And the model replies "I will try something else."
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "<class>" as "<terminal>" at depth 0
    And the run's tool-call log is:
      | name     | arguments    | ok    | result      |
      | transfer | {"amount":5} | false | not granted |
    And the model has been asked 1 time in all
    And the tool "transfer" has been called 1 time in all

    Examples:
      | class                       | extends                         | terminal                    |
      | CapabilityDeniedError       | []                              | CapabilityDeniedError       |
      | CapabilityInvokeDeniedError | []                              | CapabilityInvokeDeniedError |
      | EffectModeViolationError    | []                              | EffectModeViolationError    |
      | VendorGrantMissing          | ["CapabilityDeniedError"]       | CapabilityDeniedError       |
      | VendorInvokeDenied          | ["CapabilityInvokeDeniedError"] | CapabilityInvokeDeniedError |
      | VendorModeViolation         | ["EffectModeViolationError"]    | EffectModeViolationError    |

  @profile:agent @req:ADR0121-D1-11
  Scenario Outline: A safety or kill-switch stop raised by a tool ends the run and is never fed back (<class>)
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "<class>", "extends": <extends>, "message": "stopped"}
    And the model replies "I will try something else."
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "<class>" as "<terminal>" at depth 0
    And the run's tool-call log is:
      | name     | arguments    | ok    | result  |
      | transfer | {"amount":5} | false | stopped |
    And the model has been asked 1 time in all

    Examples:
      | class                  | extends                                            | terminal               |
      | SafetyViolationError   | []                                                 | SafetyViolationError   |
      | KillSwitchEngagedError | []                                                 | KillSwitchEngagedError |
      | VendorSafetyStop       | ["SafetyViolationError"]                           | SafetyViolationError   |
      | VendorKillSwitch       | ["KillSwitchEngagedError", "SafetyViolationError"] | KillSwitchEngagedError |

  @profile:agent @req:ADR0121-D1-12
  Scenario Outline: A quota or rate limit raised by a tool ends the run and is never fed back (<class>)
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "<class>", "extends": <extends>, "message": "over quota"}
    And the model replies "I will try something else."
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "<class>" as "<terminal>" at depth 0
    And the run's tool-call log is:
      | name     | arguments    | ok    | result     |
      | transfer | {"amount":5} | false | over quota |
    And the model has been asked 1 time in all
    And the tool "transfer" has been called 1 time in all

    Examples:
      | class                  | extends                    | terminal               |
      | QuotaExceededError     | []                         | QuotaExceededError     |
      | RateLimitExceededError | []                         | RateLimitExceededError |
      | VendorQuota            | ["QuotaExceededError"]     | QuotaExceededError     |
      | VendorRateLimit        | ["RateLimitExceededError"] | RateLimitExceededError |

  @profile:agent @req:ADR0121-D1-12
  Scenario Outline: A quota or rate limit that says retryable true is still terminal (<class>)
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "<class>", "extends": <extends>, "message": "over quota", "retryable": true}
    And the model replies "I will try something else."
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the kit classifies the failure scripted for "transfer" as terminal
    And the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "<class>" as "<terminal>" at depth 0
    And the run's tool-call log is:
      | name     | arguments    | ok    | result     |
      | transfer | {"amount":5} | false | over quota |
    And the model has been asked 1 time in all
    And the tool "transfer" has been called 1 time in all

    Examples:
      | class                  | extends                    | terminal               |
      | RateLimitExceededError | []                         | RateLimitExceededError |
      | QuotaExceededError     | []                         | QuotaExceededError     |
      | VendorRateLimit        | ["RateLimitExceededError"] | RateLimitExceededError |

  @profile:agent @req:ADR0121-D1-13
  Scenario Outline: A cancellation or a park raised by a tool ends the run and is never fed back (<class>)
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "<class>", "extends": <extends>, "message": "halted"}
    And the model replies "I will try something else."
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "<class>" as "<terminal>" at depth 0
    And the run's tool-call log is:
      | name     | arguments    | ok    | result |
      | transfer | {"amount":5} | false | halted |
    And the model has been asked 1 time in all
    And the tool "transfer" has been called 1 time in all

    Examples:
      | class                   | extends                     | terminal                |
      | ExecutionCancelledError | []                          | ExecutionCancelledError |
      | SuspendError            | []                          | SuspendError            |
      | VendorCancelled         | ["ExecutionCancelledError"] | ExecutionCancelledError |
      | VendorPark              | ["SuspendError"]            | SuspendError            |

  @profile:agent @req:ADR0121-D1-14
  Scenario Outline: An isolation or runner refusal raised by a tool ends the run and is never fed back (<class>)
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "<class>", "extends": <extends>, "message": "refused"}
    And the model replies "I will try something else."
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "<class>" as "<terminal>" at depth 0
    And the run's tool-call log is:
      | name     | arguments    | ok    | result  |
      | transfer | {"amount":5} | false | refused |
    And the model has been asked 1 time in all
    And the tool "transfer" has been called 1 time in all

    Examples:
      | class                      | extends                        | terminal                   |
      | StaleFenceError            | []                             | StaleFenceError            |
      | ExecutionSupersededError   | []                             | ExecutionSupersededError   |
      | EgressDeniedError          | []                             | EgressDeniedError          |
      | IdempotentToolRefusedError | []                             | IdempotentToolRefusedError |
      | VendorFence                | ["StaleFenceError"]            | StaleFenceError            |
      | VendorSuperseded           | ["ExecutionSupersededError"]   | ExecutionSupersededError   |
      | VendorEgress               | ["EgressDeniedError"]          | EgressDeniedError          |
      | VendorRefused              | ["IdempotentToolRefusedError"] | IdempotentToolRefusedError |

  @profile:agent @req:ADR0121-D1-15
  Scenario: An ordinary class that says retryable false ends the run and is never fed back
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "VendorError", "message": "account closed", "retryable": false}
    And the model replies "I will try something else."
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "VendorError" as "retryable:false" at depth 0
    And the run's tool-call log is:
      | name     | arguments    | ok    | result         |
      | transfer | {"amount":5} | false | account closed |
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D1-15
  Scenario Outline: A terminal class that also says retryable false is named by its class (<class>)
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "<class>", "extends": <extends>, "message": "over quota", "retryable": false}
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "<class>" as "<terminal>" at depth 0
    And the run's tool-call log is:
      | name     | arguments    | ok    | result     |
      | transfer | {"amount":5} | false | over quota |
    And the model has been asked 1 time in all

    Examples:
      | class              | extends                | terminal           |
      | QuotaExceededError | []                     | QuotaExceededError |
      | VendorQuota        | ["QuotaExceededError"] | QuotaExceededError |

  @profile:agent @req:ADR0121-D1-15
  Scenario Outline: An ordinary typed failure is fed back and the run goes on (<what>)
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure <failure>
    And the model replies "The transfer failed."
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the kit classifies the failure scripted for "transfer" as feedback
    And the run ends completed
    And the run has no terminal failure
    And the run's output is "The transfer failed."
    And request 2 to the model holds the messages:
      | role      | content                                                                                         |
      | user      | move 5                                                                                          |
      | assistant | [calls transfer {"amount":5}]                                                                   |
      | tool      | {"untrusted": {"source": "tool-error:transfer", "data": {"error": "try later"}}} [for transfer] |
    And the model has been asked 2 times in all

    Examples:
      | what                         | failure                                                                                  |
      | an unknown class             | {"class": "VendorTimeout", "message": "try later"}                                       |
      | retryable true               | {"class": "VendorTimeout", "message": "try later", "retryable": true}                    |
      | an ancestor that is ordinary | {"class": "VendorTimeout", "extends": ["TimeoutError", "Error"], "message": "try later"} |
      | the plain class Error        | {"class": "Error", "message": "try later"}                                               |

  @profile:agent @req:ADR0121-D1-16
  Scenario Outline: A terminal failure is looked for down to cause depth 5 and no deeper (<class> at depth <depth>)
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "<class>", "message": "deep"} buried at depth <depth>
    And the model replies "The transfer failed."
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the kit classifies the failure scripted for "transfer" as <verdict>
    And the run ends <status>
    And the model has been asked <asked> times in all

    Examples:
      | class                 | depth | verdict  | status    | asked |
      | CapabilityDeniedError | 4     | terminal | failed    | 1     |
      | CapabilityDeniedError | 5     | terminal | failed    | 1     |
      | CapabilityDeniedError | 6     | feedback | completed | 2     |
      | QuotaExceededError    | 5     | terminal | failed    | 1     |
      | QuotaExceededError    | 6     | feedback | completed | 2     |

  @profile:agent @req:ADR0121-D1-16
  Scenario Outline: A cause is judged by its own ancestors, down to depth 5 (depth <depth>)
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "VendorGuard", "extends": ["SafetyViolationError"], "message": "deep"} buried at depth <depth>
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the kit classifies the failure scripted for "transfer" as terminal
    And the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "VendorGuard" as "SafetyViolationError" at depth <depth>
    And the run's tool-call log is:
      | name     | arguments    | ok    | result             |
      | transfer | {"amount":5} | false | wrapper at depth 0 |
    And the model has been asked 1 time in all

    Examples:
      | depth |
      | 1     |
      | 5     |

  @profile:agent @req:ADR0121-D1-16
  Scenario: A cause whose ancestors are terminal is an ordinary failure at depth 6
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "VendorGuard", "extends": ["SafetyViolationError"], "message": "deep"} buried at depth 6
    And the model replies "The transfer failed."
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the kit classifies the failure scripted for "transfer" as feedback
    And the run ends completed
    And the run has no terminal failure
    And request 2 to the model holds the messages:
      | role      | content                                                                                                  |
      | user      | move 5                                                                                                   |
      | assistant | [calls transfer {"amount":5}]                                                                            |
      | tool      | {"untrusted": {"source": "tool-error:transfer", "data": {"error": "wrapper at depth 0"}}} [for transfer] |

  @profile:agent @req:ADR0121-D1-16
  Scenario: A terminal failure at depth 5 is named with its depth
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "KillSwitchEngagedError", "message": "deep"} buried at depth 5
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "KillSwitchEngagedError" as "KillSwitchEngagedError" at depth 5
    And the run's tool-call log is:
      | name     | arguments    | ok    | result             |
      | transfer | {"amount":5} | false | wrapper at depth 0 |
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D1-16
  Scenario: A terminal failure at depth 6 is an ordinary failure, fed back fenced
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "KillSwitchEngagedError", "message": "deep"} buried at depth 6
    And the model replies "The transfer failed."
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the run ends completed
    And the run has no terminal failure
    And request 2 to the model holds the messages:
      | role      | content                                                                                                  |
      | user      | move 5                                                                                                   |
      | assistant | [calls transfer {"amount":5}]                                                                            |
      | tool      | {"untrusted": {"source": "tool-error:transfer", "data": {"error": "wrapper at depth 0"}}} [for transfer] |

  @profile:agent @req:ADR0121-D1-16
  Scenario Outline: retryable false deep in the cause chain is terminal down to depth 5 (depth <depth>)
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "VendorError", "message": "deep", "retryable": false} buried at depth <depth>
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "VendorError" as "retryable:false" at depth <depth>
    And the run's tool-call log is:
      | name     | arguments    | ok    | result             |
      | transfer | {"amount":5} | false | wrapper at depth 0 |
    And the model has been asked 1 time in all

    Examples:
      | depth |
      | 2     |
      | 5     |

  @profile:agent @req:ADR0121-D1-16
  Scenario: retryable false at depth 6 is an ordinary failure, fed back fenced
    Given the model calls "transfer" with {"amount": 5}
    And the tool "transfer" fails with the typed failure {"class": "VendorError", "message": "deep", "retryable": false} buried at depth 6
    And the model replies "The transfer failed."
    When alice starts a run with:
      """
      {"prompt": "move 5"}
      """
    Then the run ends completed
    And the run has no terminal failure
    And request 2 to the model holds the messages:
      | role      | content                                                                                                  |
      | user      | move 5                                                                                                   |
      | assistant | [calls transfer {"amount":5}]                                                                            |
      | tool      | {"untrusted": {"source": "tool-error:transfer", "data": {"error": "wrapper at depth 0"}}} [for transfer] |

  @profile:agent @req:ADR0121-D1-17
  Scenario: A terminal failure stops the rest of its response: later calls are not run
    Given the model calls at once:
      | tool     | arguments    |
      | transfer | {"amount":5} |
      | lookup   | {"pump":3}   |
    And the tool "transfer" fails with the typed failure {"class": "CapabilityDeniedError", "message": "not granted"}
    And the model replies "never asked"
    When alice starts a run with:
      """
      {"prompt": "move 5 then look"}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run's tool-call log is:
      | name     | arguments    | ok    | result      |
      | transfer | {"amount":5} | false | not granted |
    And the tool "lookup" was never called
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D1-17
  Scenario: A terminal failure in a parallel turn aborts the sibling in flight and asks the model nothing more
    Given the model calls at once:
      | tool     | arguments    |
      | transfer | {"amount":5} |
      | north    | {}           |
    And the tool "transfer" waits, then fails with the typed failure {"class": "QuotaExceededError", "message": "over quota"}
    And the tool "north" waits
    And the model replies "never asked"
    When alice starts a run with:
      """
      {"prompt": "move 5 and check north", "parallelTools": true}
      """
    And the tools "transfer" and "north" are in flight at once
    And the tool "transfer" is released
    Then the tool "north" was called and its request was aborted
    And the run ends failed
    And the run's reason is "tool-terminal"
    And the run was ended by "transfer" raising "QuotaExceededError" as "QuotaExceededError" at depth 0
    And the run's tool-call log is:
      | name     | arguments    | ok    | result     |
      | transfer | {"amount":5} | false | over quota |
    And the model has been asked 1 time in all

  @profile:agent @req:ADR0121-D1-17
  Scenario: A terminal failure in a bounded parallel turn starts no call that was waiting for a slot
    Given the model calls at once:
      | tool     | arguments |
      | transfer | {}        |
      | transfer | {}        |
    And the tool "transfer" fails with the typed failure {"class": "SafetyViolationError", "message": "unsafe"}
    And the tool "transfer" fails with the typed failure {"class": "SafetyViolationError", "message": "unsafe"}
    And the model replies "never asked"
    When alice starts a run with:
      """
      {"prompt": "move twice", "parallelTools": 1}
      """
    Then the run ends failed
    And the run's reason is "tool-terminal"
    And the run's tool-call log is:
      | name     | arguments | ok    | result |
      | transfer | {}        | false | unsafe |
    And the tool "transfer" has been called 1 time in all
    And the model has been asked 1 time in all
