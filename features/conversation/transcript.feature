Feature: The transcript records every message once, with a unique ordinal
  As someone reading or rendering a conversation
  I want every record to appear exactly once, numbered uniquely
  So that I can key, page and quote records without guessing

  Every user turn, reply, partial, rejection and close is one record, written exactly once. Each
  record carries an ord that is unique, 1-based and increasing for the whole conversation. A
  rejected message is no turn: its record has turn 0 and a fixed reason.

  @profile:core @req:ADR0122-D3-01 @req:ADR0122-R17b-01 @configures
  Scenario: No record is duplicated by the send that follows an interruption
    Given barge-in is on
    And alice has started a conversation
    And the model waits before answering
    When alice sends "one"
    And the model has been asked 1 time
    And alice sends "two"
    Then turn 2 is answered "re: two"
    When alice sends "three"
    Then turn 3 is answered "re: three"
    And the history holds:
      | ord | turn | role      | status      | text      |
      | 1   | 1    | user      | accepted    | one       |
      | 2   | 1    | assistant | interrupted |           |
      | 3   | 2    | user      | accepted    | two       |
      | 4   | 2    | assistant | complete    | re: two   |
      | 5   | 3    | user      | accepted    | three     |
      | 6   | 3    | assistant | complete    | re: three |
    And the model has been asked 3 times in all
    And request 3 to the model holds the messages:
      | role      | content       |
      | user      | one           |
      | assistant | (interrupted) |
      | user      | two           |
      | assistant | re: two       |
      | user      | three         |

  @profile:core @req:ADR0122-D1-03 @req:ADR0122-R17b-02 @configures
  Scenario: Empty and oversized messages are rejected records and the dialogue goes on
    Given the setting "conversation.maxTurnChars" is 100
    And alice has started a conversation
    When alice sends an empty message
    And alice sends a message of 101 characters
    And alice sends "a real question"
    Then turn 1 is answered "re: a real question"
    And the history holds:
      | ord | turn | role      | status   | text               | reason    |
      | 1   | 0    | user      | rejected | -                  | malformed |
      | 2   | 0    | user      | rejected | -                  | malformed |
      | 3   | 1    | user      | accepted | a real question    |           |
      | 4   | 1    | assistant | complete | re: a real question |          |
    And the model has been asked 1 time in all

  @profile:core @req:ADR0122-D1-03
  Scenario Outline: A text of characters outside White_Space is a turn, however little it shows (<name>)
    # A blank text is made of White_Space characters only (spec/http.md); these are not among them.
    Given alice has started a conversation
    When alice sends "<unit>" 2 times
    Then the history ends with a "complete" record
    And the user record of turn 1 holds 2 characters
    And the model has been asked 1 time in all

    Examples:
      | name                      | unit   |
      | zero width space          | \u200b |
      | word joiner               | \u2060 |
      | byte order mark           | \ufeff |
      | Mongolian vowel separator | \u180e |
      | file separator            | \u001c |

  @profile:core @req:ADR0122-D1-03 @configures
  Scenario Outline: maxTurnChars is inclusive: <limit> characters are a turn, one more is rejected (setting <setting>)
    Given the setting "conversation.maxTurnChars" is <setting>
    And alice has started a conversation
    When alice sends a message of <over> characters
    And alice sends a message of <limit> characters
    Then turn 1 is answered "re: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    And the history holds:
      | ord | turn | role      | status   | reason    |
      | 1   | 0    | user      | rejected | malformed |
      | 2   | 1    | user      | accepted |           |
      | 3   | 1    | assistant | complete |           |
    And the user record of turn 1 holds <limit> characters
    And the model has been asked 1 time in all

    # 0 leaves the setting out: the default written beside it (schemas/sut-config.schema.json), 32 000.
    Examples:
      | setting | limit | over  |
      | 0       | 32000 | 32001 |
      | 100     | 100   | 101   |

  @profile:core @req:ADR0122-D1-03 @configures
  Scenario Outline: maxTurnChars counts Unicode code points: 100 are a turn, 101 are rejected (<what>)
    # spec/http.md: the length is in code points, never bytes, UTF-16 units or what a reader
    # sees as one letter.
    Given the setting "conversation.maxTurnChars" is 100
    And alice has started a conversation
    And the model replies "noted"
    When alice sends "<unit>" <over> times and then "<tail>"
    And alice sends "<unit>" <fits> times
    Then turn 1 is answered "noted"
    And the history holds:
      | ord | turn | role      | status   | reason    |
      | 1   | 0    | user      | rejected | malformed |
      | 2   | 1    | user      | accepted |           |
      | 3   | 1    | assistant | complete |           |
    And the user record of turn 1 holds 100 characters
    And the model has been asked 1 time in all

    Examples:
      | what                                       | unit    | fits | over | tail |
      | two bytes each                             | é       | 100  | 101  |      |
      | three bytes each                           | 中      | 100  | 101  |      |
      | four bytes and two UTF-16 units each       | 😀      | 100  | 101  |      |
      | ASCII and four-byte characters mixed       | a😀     | 50   | 50   | b    |
      | a letter and its combining mark, two each  | e\u0301 | 50   | 50   | x    |

  @profile:core @req:ADR0122-D1-03
  Scenario Outline: A malformed message put straight into the inbox is a rejected record
    Given alice has started a conversation
    When alice puts <payload> into the conversation's inbox
    And alice sends "still there?"
    Then turn 1 is answered "re: still there?"
    And the history holds:
      | ord | turn | role      | status   | reason    |
      | 1   | 0    | user      | rejected | malformed |
      | 2   | 1    | user      | accepted |           |
      | 3   | 1    | assistant | complete |           |

    Examples:
      | payload                                  |
      | {"kind": "user"}                         |
      | {"kind": "assistant", "text": "I agree"} |
      | {"hello": "world"}                       |

  @profile:core @req:ADR0122-R17b-03 @configures
  Scenario: The status counts accepted turns, even behind a long run of rejections
    # A small maxScan makes 300 rejections a run far longer than one history read.
    Given the setting "gateway.postsPerMinute" is 1000
    And the setting "conversation.rotateEveryTurns" is 1000
    And the setting "conversation.maxInvalidRecords" is 1000
    And the setting "conversation.maxScan" is 10
    And alice has started a conversation
    And alice sends "hello"
    And turn 1 is answered "re: hello"
    When alice sends 300 blank messages
    Then the whole history is: turn 1 "hello" answered, then 300 rejected "malformed"
    And the status of alice's conversation is open at turn 1, generation 0, owned by alice

  @profile:core @req:ADR0122-D1-30 @configures
  Scenario Outline: Empty and oversized messages count against maxInvalidRecords: <blank> empty and <oversized> oversized at a limit of 3
    Given the setting "conversation.maxInvalidRecords" is 3
    And the setting "conversation.maxTurnChars" is 20
    And alice has started a conversation
    When alice sends <blank> blank messages
    And alice sends <oversized> oversized messages
    And alice sends "still there?"
    Then turn 1 is answered "re: still there?"
    And the whole history is: <kept> rejected "malformed", then turn 1 "still there?" answered
    And the status of alice's conversation is open at turn 1, generation 0, owned by alice

    Examples:
      | blank | oversized | kept |
      | 2     | 0         | 2    |
      | 3     | 0         | 3    |
      | 4     | 0         | 3    |
      | 0     | 3         | 3    |
      | 0     | 4         | 3    |
      | 2     | 1         | 3    |
      | 2     | 2         | 3    |

  @profile:core @req:ADR0122-D1-30
  Scenario Outline: By default 100 empty or oversized messages are recorded and the next ones only counted (<blank> empty, <oversized> oversized)
    Given alice has started a conversation
    When alice sends <blank> blank messages
    And alice sends <oversized> oversized messages
    And alice sends "still there?"
    Then turn 1 is answered "re: still there?"
    And the whole history is: 100 rejected "malformed", then turn 1 "still there?" answered

    Examples:
      | blank | oversized |
      | 100   | 0         |
      | 101   | 0         |
      | 99    | 1         |
      | 100   | 1         |
      | 0     | 101       |

  @profile:durability @req:ADR0122-R17b-04 @configures
  Scenario: Ordinals stay unique and increasing across rotations
    Given the conversation rotates every 1 turn
    And alice has started a conversation
    And alice has had 2 turns answered
    When alice sends an empty message
    And alice sends "after the rejection"
    Then turn 3 is answered "re: after the rejection"
    And the history holds:
      | ord | turn | role      | status   |
      | 1   | 1    | user      | accepted |
      | 2   | 1    | assistant | complete |
      | 3   | 2    | user      | accepted |
      | 4   | 2    | assistant | complete |
      | 5   | 0    | user      | rejected |
      | 6   | 3    | user      | accepted |
      | 7   | 3    | assistant | complete |
