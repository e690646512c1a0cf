Feature: Editing an earlier message is a new turn that quotes it
  As a person who mistyped a question
  I want to send a corrected version that refers to the original
  So that the agent knows what I changed without the transcript being rewritten

  The transcript is append-only: an edit is a new turn whose editOf names the ord of one of my
  earlier accepted user records still in the carried window. The model sees the earlier words
  quoted as data inside my new message. Anything else is one rejected record, "edit-invalid".

  @profile:core @req:ADR0122-R17b-05
  Scenario: An edit is a new turn carrying the quoted earlier text as data
    Given alice has started a conversation
    When alice sends "check pump 3"
    Then turn 1 is answered "re: check pump 3"
    Given the model replies "checking pump 4 instead"
    When alice sends "check pump 4" as an edit of record 1
    Then turn 2 is answered "checking pump 4 instead"
    And the history holds:
      | ord | turn | role      | status   | text                    | editOf | editOfTurn |
      | 1   | 1    | user      | accepted | check pump 3            |        |            |
      | 2   | 1    | assistant | complete | re: check pump 3        |        |            |
      | 3   | 2    | user      | accepted | check pump 4            | 1      | 1          |
      | 4   | 2    | assistant | complete | checking pump 4 instead |        |            |
    And the last user message of request 2 to the model quotes "check pump 3" and says "check pump 4"
    And request 2 to the model holds the messages:
      | role      | content                                                                    |
      | user      | check pump 3                                                               |
      | assistant | re: check pump 3                                                           |
      | user      | [This message edits the user's earlier message "check pump 3".]\ncheck pump 4 |

  @profile:core @req:ADR0122-R17b-05
  Scenario: An edit of an edit quotes the words its user wrote, not the quote the model was sent with them
    # spec/prompt.md: the quote is the edited turn's own text; the window still shows the model the
    # earlier edit as it was sent, quote line and all.
    Given alice has started a conversation
    When alice sends "check pump 3"
    Then turn 1 is answered "re: check pump 3"
    Given the model replies "checking pump 4 instead"
    When alice sends "check pump 4" as an edit of record 1
    Then turn 2 is answered "checking pump 4 instead"
    Given the model replies "checking pump 5 instead"
    When alice sends "check pump 5" as an edit of record 3
    Then turn 3 is answered "checking pump 5 instead"
    And the history holds:
      | ord | turn | role      | status   | text                    | editOf | editOfTurn |
      | 1   | 1    | user      | accepted | check pump 3            |        |            |
      | 2   | 1    | assistant | complete | re: check pump 3        |        |            |
      | 3   | 2    | user      | accepted | check pump 4            | 1      | 1          |
      | 4   | 2    | assistant | complete | checking pump 4 instead |        |            |
      | 5   | 3    | user      | accepted | check pump 5            | 3      | 2          |
      | 6   | 3    | assistant | complete | checking pump 5 instead |        |            |
    And request 3 to the model holds the messages:
      | role      | content                                                                       |
      | user      | check pump 3                                                                  |
      | assistant | re: check pump 3                                                              |
      | user      | [This message edits the user's earlier message "check pump 3".]\ncheck pump 4 |
      | assistant | checking pump 4 instead                                                       |
      | user      | [This message edits the user's earlier message "check pump 4".]\ncheck pump 5 |

  @profile:core @req:ADR0122-R17b-05
  Scenario Outline: The quote of an edited message is its first 500 characters (a message of <size>)
    Given alice has started a conversation
    When alice sends a message of <size> characters
    Then turn 1 is answered "re: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    Given the model replies "noted"
    When alice sends "shorter" as an edit of record 1
    Then turn 2 is answered "noted"
    And the last user message of request 2 to the model quotes <quoted> characters of turn 1 and says "shorter"

    Examples:
      | size | quoted |
      | 499  | 499    |
      | 500  | 500    |
      | 501  | 500    |

  @profile:core @req:ADR0122-R17b-05
  Scenario Outline: The quote is the first 500 code points of the edited message (<what>)
    # spec/prompt.md: code points, never bytes, UTF-16 units or letters as a reader sees them; a
    # cut may part a letter from its combining mark. The quote is a JSON string.
    Given alice has started a conversation
    And the model replies "seen"
    When alice sends "<unit>" <n> times and then "<tail>"
    Then turn 1 is answered "seen"
    Given the model replies "noted"
    When alice sends "shorter" as an edit of record 1
    Then turn 2 is answered "noted"
    And the last user message of request 2 to the model quotes <quoted> characters of turn 1 and says "shorter"

    Examples:
      | what                                         | unit           | n   | tail | quoted |
      | 500 two-byte characters, whole               | é              | 500 |      | 500    |
      | 501 two-byte characters, cut                 | é              | 501 |      | 500    |
      | 501 three-byte characters, cut               | 中             | 501 |      | 500    |
      | 500 emoji, whole                             | 😀             | 500 |      | 500    |
      | 501 emoji, cut                               | 😀             | 501 |      | 500    |
      | 499 ASCII, then an emoji at the 500th place  | x              | 499 | 😀x  | 500    |
      | 250 letters with a combining mark, whole     | e\u0301        | 250 |      | 500    |
      | a combining mark parted from its letter      | e\u0301        | 249 | xe\u0301 | 500 |
      | joined emoji, cut after a joiner             | 👩\u200d💻     | 167 |      | 500    |
      | control characters and a line separator      | x              | 497 | \t\u0001\u2028 | 500 |

  @profile:core @req:ADR0122-R17b-06
  Scenario Outline: An edit that names no earlier user turn of mine is one rejected record
    Given alice has started a conversation
    And alice sends an empty message
    And alice sends "check pump 3"
    And turn 1 is answered "re: check pump 3"
    When alice sends "check pump 4" as an edit of record <ord>
    And alice sends "are you there?"
    Then turn 2 is answered "re: are you there?"
    And record 4 is rejected with reason "edit-invalid"
    And the model has been asked 2 times in all
    And request 2 to the model holds the messages:
      | role      | content          |
      | user      | check pump 3     |
      | assistant | re: check pump 3 |
      | user      | are you there?   |

    Examples:
      | ord | what it names               |
      | 1   | a rejected record           |
      | 3   | an assistant record         |
      | 99  | a record that does not exist |

  @profile:core @req:ADR0122-R17b-07
  Scenario Outline: An editOf that is not a positive integer is a bad request
    Given alice has started a conversation
    And alice has had 1 turn answered
    When alice sends "check pump 4" with editOf <value>
    Then the answer is 400 with error "bad request"

    Examples:
      | value |
      | 1.5   |
      | "1"   |
      | true  |
      | 0     |
      | -1    |

  @profile:durability @req:ADR0122-R17b-08 @configures
  Scenario: An edit reaches a turn carried across a rotation
    Given the conversation rotates every 1 turn
    And alice has started a conversation
    When alice sends "check pump 3"
    Then turn 1 is answered "re: check pump 3"
    Given the model replies "checking pump 4 instead"
    When alice sends "check pump 4" as an edit of record 1
    Then turn 2 is answered "checking pump 4 instead"
    And the last user message of request 2 to the model quotes "check pump 3" and says "check pump 4"
    And request 2 to the model holds the messages:
      | role      | content                                                                    |
      | user      | check pump 3                                                               |
      | assistant | re: check pump 3                                                           |
      | user      | [This message edits the user's earlier message "check pump 3".]\ncheck pump 4 |
