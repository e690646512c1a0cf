Feature: The carry takes a window that lost turns across a rotation
  As the owner of a long conversation
  I want the turns the window still holds to reach the next generation whole and in order
  So that a rotation after older turns left the window changes nothing I can see

  When a conversation continues as new, the next generation is sent the window's turns (spec/prompt.md
  section 4): a run of the earlier turns ending with the newest, oldest first, each question and reply
  exactly as before. Turns the window let go (by maxWindowTurns, or by maxCarryBytes at the rotation)
  are not among them, the history keeps every turn, and the conversation goes on answering.

  @profile:durability @req:ADR0122-D4-01 @req:ADR0122-D4-04 @req:ADR0122-D3-08 @configures
  Scenario: A window exactly at maxWindowTurns crosses a rotation whole
    Given the conversation rotates every 2 turns
    And the setting "conversation.maxWindowTurns" is 2
    And the summarizer is not configured
    And alice has started a conversation
    And alice remembers the generation
    And alice has had 2 turns answered
    And alice remembers the history
    When alice sends "what did I say?"
    Then turn 3 is answered "re: what did I say?"
    And the generation has moved on by 1
    And the model has been asked 3 times in all
    And request 3 to the model holds the messages:
      | role      | content         |
      | user      | question 1      |
      | assistant | re: question 1  |
      | user      | question 2      |
      | assistant | re: question 2  |
      | user      | what did I say? |
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text                |
      | 5   | 3    | user      | accepted | what did I say?     |
      | 6   | 3    | assistant | complete | re: what did I say? |

  @profile:durability @req:ADR0122-D4-01 @req:ADR0122-D4-04 @req:ADR0122-D3-08 @configures
  Scenario: A window that let its oldest turn go just before a rotation carries only the newer turns, oldest first
    # Turn 3 is one more than maxWindowTurns: turn 1 leaves the window when turn 3 is answered,
    # and the conversation continues as new before turn 4 starts.
    Given the conversation rotates every 3 turns
    And the setting "conversation.maxWindowTurns" is 2
    And the summarizer is not configured
    And alice has started a conversation
    And alice remembers the generation
    And alice has had 3 turns answered
    And alice remembers the history
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And the generation has moved on by 1
    And request 4 to the model holds the messages:
      | role      | content         |
      | user      | question 2      |
      | assistant | re: question 2  |
      | user      | question 3      |
      | assistant | re: question 3  |
      | user      | what did I say? |
    When alice sends "and before that?"
    Then turn 5 is answered "re: and before that?"
    And the model has been asked 5 times in all
    And request 5 to the model holds the messages:
      | role      | content             |
      | user      | question 3          |
      | assistant | re: question 3      |
      | user      | what did I say?     |
      | assistant | re: what did I say? |
      | user      | and before that?    |
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text                 |
      | 7   | 4    | user      | accepted | what did I say?      |
      | 8   | 4    | assistant | complete | re: what did I say?  |
      | 9   | 5    | user      | accepted | and before that?     |
      | 10  | 5    | assistant | complete | re: and before that? |

  @profile:durability @req:ADR0122-D4-01 @req:ADR0122-D4-04 @configures
  Scenario: A turn that left the window just before a rotation reaches the summarizer whole, and the model only through the summary
    # With maxWindowTurns 1, turn 1 leaves the window when turn 2 is answered; it is handed to the
    # summarizer before turn 3's request to the model, which the next generation sends, and the
    # answer is the summary from the next turn on (spec/prompt.md section 3).
    Given the conversation rotates every 2 turns
    And the setting "conversation.maxWindowTurns" is 1
    And the summarizer always answers "alice asked about pumps"
    And alice has started a conversation
    And alice remembers the generation
    And alice has had 2 turns answered
    And alice remembers the history
    When alice sends "what did I say?"
    Then turn 3 is answered "re: what did I say?"
    And the generation has moved on by 1
    And summarizer request 1 holds the previous summary "" and the messages:
      | role      | content        |
      | user      | question 1     |
      | assistant | re: question 1 |
    And request 3 to the model holds the messages:
      | role      | content         |
      | user      | question 2      |
      | assistant | re: question 2  |
      | user      | what did I say? |
    When alice sends "and before that?"
    Then turn 4 is answered "re: and before that?"
    And summarizer request 2 holds the previous summary "alice asked about pumps" and the messages:
      | role      | content        |
      | user      | question 2     |
      | assistant | re: question 2 |
    And request 4 to the model holds the messages:
      | role      | content             |
      | user      | {summary}           |
      | assistant | (summary noted)     |
      | user      | what did I say?     |
      | assistant | re: what did I say? |
      | user      | and before that?    |
    And the summarizer has been asked 2 times in all
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text                 |
      | 5   | 3    | user      | accepted | what did I say?      |
      | 6   | 3    | assistant | complete | re: what did I say?  |
      | 7   | 4    | user      | accepted | and before that?     |
      | 8   | 4    | assistant | complete | re: and before that? |

  @profile:durability @req:ADR0122-D4-01 @req:ADR0122-D4-04 @req:ADR0122-D3-08 @configures
  Scenario Outline: A carry of multi-byte turns at its byte bound keeps exactly the turns the bound allows (<bytes> bytes)
    # Bytes of UTF-8: "€" takes 3, "😀" 4, "question N" 10. Turn 2's texts take 10 + 1387 x 3 =
    # 4171 bytes, turn 3's 10 + 1003 x 4 = 4022: 8193 together. Turn 1 has left the window by
    # count (maxWindowTurns 2) when the conversation continues as new before turn 4. At 16386 the
    # two newest take exactly half the bound, which the carry of a small conversation with no
    # summary always keeps; at 8192 they take one byte more than the bound, so turn 2 cannot
    # cross, and turn 3 alone takes under half of it, so it must (spec/prompt.md section 4).
    Given the conversation rotates every 3 turns
    And the setting "conversation.maxWindowTurns" is 2
    And the setting "conversation.maxCarryBytes" is <bytes>
    And the summarizer is not configured
    And alice has started a conversation
    And alice remembers the generation
    And alice has had 1 turn answered
    And alice has had 1 turn answered with a reply of 1387 "€"
    And alice has had 1 turn answered with a reply of 1003 "😀"
    And alice remembers the history
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And the generation has moved on by 1
    And the model has been asked 4 times in all
    And request 4 to the model holds exactly turns <kept> as sent and answered, then "what did I say?"
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text                |
      | 7   | 4    | user      | accepted | what did I say?     |
      | 8   | 4    | assistant | complete | re: what did I say? |

    Examples:
      | bytes | kept |
      | 16386 | 2, 3 |
      | 8192  | 3    |

  @profile:durability @req:ADR0122-D4-01 @req:ADR0122-D4-04 @req:ADR0122-D3-08 @configures
  Scenario Outline: A carry counts its turns' texts by their bytes, not by how an encoding spells them ("<char>")
    # "question N" takes 10 bytes and each reply 2038 of a one-byte character, so turns 2 and 3
    # take 2048 + 2048 = 4096 bytes: exactly half of maxCarryBytes, which the carry of a small
    # conversation with no summary always keeps (spec/prompt.md section 4), whatever an encoding
    # makes of the characters (JSON may spell "<" or "&" in six bytes, a quote in two).
    Given the conversation rotates every 3 turns
    And the setting "conversation.maxWindowTurns" is 2
    And the setting "conversation.maxCarryBytes" is 8192
    And the summarizer is not configured
    And alice has started a conversation
    And alice remembers the generation
    And alice has had 1 turn answered
    And alice has had 1 turn answered with a reply of 2038 "<char>"
    And alice has had 1 turn answered with a reply of 2038 "<char>"
    And alice remembers the history
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And the generation has moved on by 1
    And the model has been asked 4 times in all
    And request 4 to the model holds exactly turns 2, 3 as sent and answered, then "what did I say?"
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text                |
      | 7   | 4    | user      | accepted | what did I say?     |
      | 8   | 4    | assistant | complete | re: what did I say? |

    Examples:
      | char |
      | <    |
      | &    |
      | >    |
