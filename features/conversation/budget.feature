Feature: The context fits the model's window, and what leaves it is summarized
  As an operator paying for a model with a fixed context window
  I want every request to fit, however long the conversation grows
  So that long conversations keep working instead of failing on the provider's limit

  Before each turn the conversation counts tokens (spec/token-counting.md) and keeps the longest
  newest run of whole turns that fits beside the fixed parts. The prompt is never dropped: one that
  cannot fit even alone is a rejected record. Turns that leave the window are folded into a rolling
  summary, which travels fenced as user content and can never wedge the conversation.

  With the standard tools the tools block costs 75 tokens, a turn of 400 characters with its default
  reply costs 124, and a short prompt about 8; a window of 400 therefore holds two such turns.

  Background:
    Given the settings are:
      | setting                                 | value |
      | conversation.budget.contextWindow       | 400   |
      | conversation.budget.reserveOutputTokens | 0     |
      | conversation.budget.perMessage          | 4     |

  @profile:budget @req:ADR0122-D5-01 @configures
  Scenario: The newest whole turns that fit are kept and the rest leave the request
    Given the summarizer is not configured
    And alice has started a conversation
    And alice has had 3 turns of 400 characters answered
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And the window of request 4 to the model holds turns 2, 3
    And request 4 to the model holds the messages:
      | role      | content         |
      | user      | {turn 2}        |
      | assistant | {reply 2}       |
      | user      | {turn 3}        |
      | assistant | {reply 3}       |
      | user      | what did I say? |

  @profile:budget @req:ADR0122-D5-01 @configures
  Scenario Outline: The fit is exact to the token (a window of <window>)
    # The tools block costs 75, the prompt 8 and each earlier turn 124: two turns need 331.
    Given the setting "conversation.budget.contextWindow" is <window>
    And the summarizer is not configured
    And alice has started a conversation
    And alice has had 3 turns of 400 characters answered
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And the window of request 4 to the model holds turns <kept>

    Examples:
      | window | kept |
      | 331    | 2, 3 |
      | 330    | 3    |

  @profile:budget @req:ADR0122-D5-01 @configures
  Scenario Outline: The fit counts the summary and its acknowledgement to the token (a window of <window>)
    # Beside the tools (75) and the prompt (8), the summary as sent (fenced) costs 22 and
    # "(summary noted)" 8: two earlier turns need 361.
    Given the setting "conversation.budget.contextWindow" is <window>
    And the summarizer always answers "alice asked about pumps"
    And alice has started a conversation
    And alice has had 3 turns of 400 characters answered
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And request 4 to the model carries the summary "alice asked about pumps" fenced in a user message
    And the window of request 4 to the model holds turns <kept>

    Examples:
      | window | kept |
      | 361    | 2, 3 |
      | 360    | 3    |

  @profile:budget @req:ADR0122-D5-02 @configures
  Scenario: A prompt that cannot fit even alone is rejected and the dialogue goes on
    Given alice has started a conversation
    When alice sends a message of 1400 characters
    And alice sends "is this shorter?"
    Then turn 1 is answered "re: is this shorter?"
    And record 1 is rejected with reason "prompt-too-large"
    And the model has been asked 1 time in all

  @profile:budget @req:ADR0122-D5-02 @configures
  Scenario Outline: A prompt that fits alone to the token is a turn, one token more is rejected (<text>)
    # Alone beside the tools (75): <fits> characters cost exactly the 400 of the window.
    Given alice has started a conversation
    When alice sends <over>
    And alice sends <fits>
    Then turn 1 is answered "re: <echo>"
    And record 1 is rejected with reason "prompt-too-large"
    And the model has been asked 1 time in all

    Examples:
      | text      | over                         | fits                         | echo                                                         |
      | ASCII     | a message of 1285 characters | a message of 1284 characters | xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx |
      | non-ASCII | 322 characters of "漢"        | 321 characters of "漢"        | 漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢漢 |

  @profile:budget @req:ADR0122-D5-02 @req:ADR0122-D5-03 @configures
  Scenario Outline: Tokens are counted per code point, never per byte or UTF-16 unit: a prompt of <what> fits to the token
    # Alone beside the tools (75) and its overhead (4), a prompt may count 321 tokens: an ASCII code
    # point is a quarter token, rounded up once for the whole text, every other code point one
    # (spec/token-counting.md §2).
    Given alice has started a conversation
    And the model replies "noted"
    When alice sends "<unit>" <over> times and then "<overTail>"
    And alice sends "<unit>" <fits> times and then "<fitsTail>"
    Then turn 1 is answered "noted"
    And record 1 is rejected with reason "prompt-too-large"
    And the model has been asked 1 time in all

    Examples:
      | what                                      | unit     | over | overTail | fits | fitsTail |
      | two-byte characters                       | é        | 322  |          | 321  |          |
      | four-byte characters (two UTF-16 units)   | 😀       | 322  |          | 321  |          |
      | three-byte characters and ASCII           | 中       | 320  | xxxxx    | 320  | xxxx     |
      | letters with a combining mark (1/4 + 1)   | e\u0301  | 257  |          | 256  | x        |

  @profile:budget @req:ADR0122-D5-03 @configures
  Scenario: Text outside ASCII counts a whole token per character
    Given alice has started a conversation
    When alice sends 330 characters of "漢"
    And alice sends a message of 330 characters
    Then turn 1 is answered "re: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    And record 1 is rejected with reason "prompt-too-large"

  @profile:budget @req:ADR0122-D5-05 @configures
  Scenario: Evicted turns are folded into a summary that travels fenced as user content
    Given the summarizer answers "alice asked about pumps"
    And alice has started a conversation
    And alice has had 3 turns of 400 characters answered
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And the summarizer was handed the words of turn 1
    And summarizer request 1 holds the previous summary "" and the messages:
      | role      | content   |
      | user      | {turn 1}  |
      | assistant | {reply 1} |
    And request 4 to the model carries the summary "alice asked about pumps" fenced in a user message
    And no system message of any request to the model holds "alice asked about pumps"
    And request 4 to the model holds the messages:
      | role      | content         |
      | user      | {summary}       |
      | assistant | (summary noted) |
      | user      | {turn 2}        |
      | assistant | {reply 2}       |
      | user      | {turn 3}        |
      | assistant | {reply 3}       |
      | user      | what did I say? |

  @profile:budget @req:ADR0122-D5-06 @configures
  Scenario: A failing summarizer keeps the previous summary and the conversation goes on
    # How often a failing summarizer is retried is its own policy: it fails here for good, so any
    # number of retries ends the same way.
    Given the summarizer answers "alice asked about pumps"
    And the summarizer then always fails with status 503
    And alice has started a conversation
    And alice has had 4 turns of 400 characters answered
    When alice sends "what did I say?"
    Then turn 5 is answered "re: what did I say?"
    And the summarizer has been asked 2 times
    And request 5 to the model carries the summary "alice asked about pumps" fenced in a user message
    And the window of request 5 to the model holds turns 3, 4
    And request 5 to the model holds the messages:
      | role      | content         |
      | user      | {summary}       |
      | assistant | (summary noted) |
      | user      | {turn 3}        |
      | assistant | {reply 3}       |
      | user      | {turn 4}        |
      | assistant | {reply 4}       |
      | user      | what did I say? |

  @profile:budget @req:ADR0122-D5-07 @configures
  Scenario Outline: The summary is cut to maxSummaryTokens (setting <setting>, a summary of <size>)
    Given the setting "conversation.budget.maxSummaryTokens" is <setting>
    And the summarizer answers a summary of <size> characters
    And alice has started a conversation
    And alice has had 3 turns of 400 characters answered
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And request 4 to the model carries the first <kept> characters of that summary, fenced

    # 0 leaves the setting out: the documented default, a quarter of the window (100 tokens).
    Examples:
      | setting | size | kept |
      | 20      | 80   | 80   |
      | 20      | 81   | 80   |
      | 20      | 500  | 80   |
      | 0       | 400  | 400  |
      | 0       | 401  | 400  |

  @profile:budget @req:ADR0122-D5-07 @configures
  Scenario Outline: The summary cut counts a token per character outside ASCII, whatever its bytes (<n> "<unit>")
    # spec/token-counting.md §2 and §6: four ASCII characters make a token, every other code point
    # one, so 8 tokens keep 32 ASCII characters or 8 of any other, one to four bytes each alike.
    Given the setting "conversation.budget.maxSummaryTokens" is 8
    And the summarizer answers a summary of <n> "<unit>" characters
    And alice has started a conversation
    And alice has had 3 turns of 400 characters answered
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And request 4 to the model carries the first <kept> characters of that summary, as the kit trims it to 8 tokens, fenced

    Examples:
      | unit | n  | kept |
      | x    | 32 | 32   |
      | x    | 33 | 32   |
      | é    | 8  | 8    |
      | é    | 9  | 8    |
      | 中   | 8  | 8    |
      | 中   | 9  | 8    |
      | 😀   | 8  | 8    |
      | 😀   | 9  | 8    |

  @profile:budget @req:ADR0122-D5-08 @configures
  Scenario: A summary too big for one turn is left out of that turn only
    Given the summarizer always answers a summary of 400 characters
    And alice has started a conversation
    And alice has had 3 turns of 400 characters answered
    When alice sends a message of 1000 characters
    Then turn 4 is answered "re: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    And request 4 to the model carries no summary
    When alice sends "and now?"
    Then turn 5 is answered "re: and now?"
    And request 5 to the model carries that summary, fenced

  @profile:budget @req:ADR0122-D5-09 @configures
  Scenario Outline: maxWindowTurns bounds the window with or without a budget (<setting>, <turns> turns)
    Given the setting "conversation.budget" is null
    And the setting "conversation.maxWindowTurns" is <setting>
    And alice has started a conversation
    And alice has had <turns> turns answered
    When alice sends "what did I say?"
    Then the window of request <request> to the model holds turns <kept>

    # 0 leaves the setting out: the documented default, 64.
    Examples:
      | setting | turns | request | kept    |
      | 2       | 2     | 3       | 1, 2    |
      | 2       | 3     | 4       | 2, 3    |
      | 0       | 64    | 65      | 1 to 64 |
      | 0       | 65    | 66      | 2 to 65 |

  @profile:budget @req:ADR0122-D5-09 @configures
  Scenario: maxWindowTurns bounds the window under a token budget too
    Given the setting "conversation.maxWindowTurns" is 1
    And the summarizer is not configured
    And alice has started a conversation
    And alice has had 2 turns answered
    When alice sends "what did I say?"
    Then turn 3 is answered "re: what did I say?"
    And the window of request 3 to the model holds turns 2

  @profile:budget @req:ADR0122-D5-04 @crash @configures
  Scenario: Budget verdicts are recorded, so a counter that changed after a restart does not change the past
    Given the summarizer always answers "alice asked about pumps"
    And alice has started a conversation
    And alice has had 3 turns of 400 characters answered
    And the summarizer has been asked 1 time
    And alice remembers the history
    When the system is killed and restarted with the setting "conversation.budget.perMessage" at 40
    Then the history is the remembered one, byte for byte
    When alice sends "what now?"
    Then turn 4 is answered "re: what now?"
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text          |
      | 7   | 4    | user      | accepted | what now?     |
      | 8   | 4    | assistant | complete | re: what now? |
    And the summarizer has been asked 2 times in all
    And the model has been asked 4 times in all

  @profile:budget @req:ADR0122-D5-04 @crash @configures
  Scenario: A turn counted before a restart keeps its recorded cost when the counter changes
    # Before the restart (perMessage 4) the fits of turns 2 and 3 counted turns 1 and 2 at 15
    # tokens each. After it (perMessage 40) the tools cost 255, "what now?" 43 and turn 3, never
    # counted yet, 87: 385 with turn 3, 400 with turn 2 at its recorded 15, 415 with turn 1, so
    # turns 2 and 3 are kept. Turn 2 counted again would cost 87 and leave it out.
    Given the setting "conversation.budget.contextWindow" is 410
    And the summarizer is not configured
    And alice has started a conversation
    And alice has had 3 turns answered
    When the system is killed and restarted with the setting "conversation.budget.perMessage" at 40
    And alice sends "what now?"
    Then turn 4 is answered "re: what now?"
    And the window of request 4 to the model holds turns 2, 3
    And request 4 to the model holds the messages:
      | role      | content        |
      | user      | question 2     |
      | assistant | re: question 2 |
      | user      | question 3     |
      | assistant | re: question 3 |
      | user      | what now?      |

  @profile:budget @req:ADR0122-D5-10 @configures
  Scenario: The summary crosses rotations with the carry
    Given the conversation rotates every 1 turn
    And the summarizer always answers "alice asked about pumps"
    And alice has started a conversation
    And alice has had 3 turns of 400 characters answered
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And the status says the conversation is "open" after 4 turns in generation 3 or later
    And request 4 to the model holds the messages:
      | role      | content         |
      | user      | {summary}       |
      | assistant | (summary noted) |
      | user      | {turn 2}        |
      | assistant | {reply 2}       |
      | user      | {turn 3}        |
      | assistant | {reply 3}       |
      | user      | what did I say? |

  @profile:budget @req:ADR0122-D5-01 @configures
  Scenario: The fit stops at the first turn that does not fit, even when an older one is smaller
    # Beside the tools (75) and a 400-character prompt (104), turn 3 (124) fits and turn 2 (124)
    # does not; turn 1, short (15), would, but the kept turns are the newest run only.
    Given the summarizer is not configured
    And alice has started a conversation
    And alice has had 1 turn answered
    And alice has had 3 turns of 400 characters answered
    When alice sends "what did I say?"
    Then turn 5 is answered "re: what did I say?"
    And the window of request 3 to the model holds turns 1, 2
    And the window of request 4 to the model holds turns 3
    And request 4 to the model holds the messages:
      | role      | content   |
      | user      | {turn 3}  |
      | assistant | {reply 3} |
      | user      | {turn 4}  |
    And the window of request 5 to the model holds turns 3, 4

  @profile:budget @req:ADR0122-D5-04 @crash @configures
  Scenario: The summary a restart replays is the one recorded, whatever maxSummaryTokens says now
    Given the setting "conversation.budget.maxSummaryTokens" is 20
    And the summarizer always answers a summary of 200 characters
    And alice has started a conversation
    And alice has had 3 turns of 400 characters answered
    And the summarizer has been asked 1 time
    When the system is killed and restarted with the setting "conversation.budget.maxSummaryTokens" at 10
    And alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And request 4 to the model carries the first 80 characters of that summary, fenced
    And the summarizer has been asked 1 time in all

  @profile:budget @req:ADR0122-D5-08 @configures
  Scenario: A summary that fills the budget exactly beside the fixed parts is sent
    # Beside the tools (75) and the prompt (8), the summary as sent costs 22 and its
    # acknowledgement 8: 113 in all, the whole window, so no earlier turn (15) fits beside it.
    Given the setting "conversation.maxWindowTurns" is 1
    And the setting "conversation.budget.contextWindow" is 113
    And the summarizer always answers "alice asked about pumps"
    And alice has started a conversation
    And alice has had 3 turns answered
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And request 4 to the model holds the messages:
      | role      | content         |
      | user      | {summary}       |
      | assistant | (summary noted) |
      | user      | what did I say? |

  @profile:budget @req:ADR0122-D5-08 @configures
  Scenario: A summary one token over the budget is left out and the newest turn takes its place
    Given the setting "conversation.maxWindowTurns" is 1
    And the setting "conversation.budget.contextWindow" is 112
    And the summarizer always answers "alice asked about pumps"
    And alice has started a conversation
    And alice has had 3 turns answered
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And request 4 to the model carries no summary
    And request 4 to the model holds the messages:
      | role      | content         |
      | user      | question 3      |
      | assistant | re: question 3  |
      | user      | what did I say? |
