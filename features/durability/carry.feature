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

  @profile:durability @req:ADR0122-D4-01 @req:ADR0122-D4-04 @req:ADR0122-D3-08 @configures
  Scenario Outline: An edited turn's quote line counts toward the carry's byte bound (<bytes> bytes)
    # What crosses for an edited turn is its question as the model was sent it, the quote line
    # included (spec/prompt.md section 1: the window holds each turn as the prompt the model saw;
    # section 4: each question and reply exactly as before), so its bytes count toward the bound.
    # Turn 1 is 500 "😀" (2000 bytes); turn 2 edits it with "check pump 4", so the model is sent
    # the 48 bytes of the note's opening, the 2000 quoted, '".]', a line feed and the 12 of the
    # text: 2064 bytes. Its reply is 1500 "😀" (6000 bytes): 8064 with the question, 6012 counting
    # only the text the user sent. Turn 1 has left the window by count (maxWindowTurns 1) when the
    # conversation continues as new before turn 3. At 8063 turn 2 takes one byte more than the
    # bound and cannot cross; at 16128 it takes exactly half of it, which the carry of a small
    # conversation with no summary always keeps. At 8064 to 16127 whether it crosses is the
    # system's own (what the carry spends besides the turns), so those bounds are not pinned.
    Given the conversation rotates every 2 turns
    And the setting "conversation.maxWindowTurns" is 1
    And the setting "conversation.maxCarryBytes" is <bytes>
    And the summarizer is not configured
    And alice has started a conversation
    And alice remembers the generation
    And the model replies "seen"
    When alice sends "😀" 500 times
    Then turn 1 is answered "seen"
    Given alice has had turn 1 edited as "check pump 4" and answered with a reply of 1500 "😀"
    Then the last user message of request 2 to the model quotes 500 characters of turn 1 and says "check pump 4"
    Given alice remembers the history
    When alice sends "what did I say?"
    Then turn 3 is answered "re: what did I say?"
    And the generation has moved on by 1
    And the model has been asked 3 times in all
    And request 3 to the model holds exactly <kept>, then "what did I say?"
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text                |
      | 5   | 3    | user      | accepted | what did I say?     |
      | 6   | 3    | assistant | complete | re: what did I say? |

    Examples:
      | bytes | kept                         |
      | 8063  | no earlier turn              |
      | 16128 | turns 2 as sent and answered |

  @profile:durability @req:ADR0122-D4-01 @req:ADR0122-D4-04 @req:ADR0122-D3-08 @configures
  Scenario: A carry that has to drop a turn keeps the summary, which crosses whenever dropping every turn is enough
    # spec/prompt.md section 4: whole turns are dropped, oldest first, and the summary only when
    # dropping every turn is not enough. With maxWindowTurns 1, turn 1 leaves the window when turn
    # 2 is answered and is summarized before turn 3's request; turn 2 leaves when turn 3 is
    # answered, and the conversation continues as new before turn 4. Turn 2's texts take 10 + 8183
    # = 8193 bytes, one more than maxCarryBytes, so it cannot cross (and when it is summarized
    # before the rotation the summary is the same: the summarizer always answers the same). With
    # every turn dropped, the carry holds besides what a small conversation spends (within half
    # of the bound, section 4's last rule) only the summary's 23 bytes: dropping every turn is
    # enough, so the summary crosses, and so does turn 3 (23 bytes): no turn is dropped that fits.
    # Whether turn 2 reached the summarizer is the system's own, so only the first call is pinned.
    Given the conversation rotates every 3 turns
    And the setting "conversation.maxWindowTurns" is 1
    And the setting "conversation.maxCarryBytes" is 8192
    And the summarizer always answers "alice asked about pumps"
    And alice has started a conversation
    And alice remembers the generation
    And alice has had 1 turn answered
    And alice has had 1 turn answered with a reply of 8183 "a"
    And alice has had 1 turn answered
    And alice remembers the history
    When alice sends "what did I say?"
    Then turn 4 is answered "re: what did I say?"
    And the generation has moved on by 1
    And the model has been asked 4 times in all
    And summarizer request 1 holds the previous summary "" and the messages:
      | role      | content        |
      | user      | question 1     |
      | assistant | re: question 1 |
    And request 4 to the model holds the messages:
      | role      | content         |
      | user      | {summary}       |
      | assistant | (summary noted) |
      | user      | question 3      |
      | assistant | re: question 3  |
      | user      | what did I say? |
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text                |
      | 7   | 4    | user      | accepted | what did I say?     |
      | 8   | 4    | assistant | complete | re: what did I say? |

  @profile:durability @req:ADR0122-D4-01 @req:ADR0122-D4-04 @req:ADR0122-D3-08 @configures
  Scenario Outline: A carry over its bound drops the turn that left the window before the window's turns (<bytes> bytes)
    # Turns are dropped oldest first (spec/prompt.md section 4), and a turn that left the window
    # and waits for the summarizer is older than every turn the window holds. With maxWindowTurns
    # 1, turn 1 (10 + 4087 = 4097 bytes) leaves the window when turn 2 (10 + 1362 x 3 = 4096
    # bytes) is answered, and the conversation continues as new before turn 3: 8193 bytes of
    # turns, one more than 8192, so at 8192 one of them must go, and it is turn 1. At both bounds
    # turn 2 takes at most half of maxCarryBytes, which the carry of a small conversation with no
    # summary always keeps. The summarizer fails, so no summary ever reaches the model whatever
    # became of turn 1 (section 3); whether turn 1 crossed to be handed to it, or was handed to it
    # before the rotation, is the system's own, so its calls are not pinned.
    Given the conversation rotates every 2 turns
    And the setting "conversation.maxWindowTurns" is 1
    And the setting "conversation.maxCarryBytes" is <bytes>
    And the summarizer then always fails with status 503
    And alice has started a conversation
    And alice remembers the generation
    And alice has had 1 turn answered with a reply of 4087 "a"
    And alice has had 1 turn answered with a reply of 1362 "€"
    And alice remembers the history
    When alice sends "what did I say?"
    Then turn 3 is answered "re: what did I say?"
    And the generation has moved on by 1
    And the model has been asked 3 times in all
    And request 3 to the model holds exactly turns 2 as sent and answered, then "what did I say?"
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text                |
      | 5   | 3    | user      | accepted | what did I say?     |
      | 6   | 3    | assistant | complete | re: what did I say? |

    Examples:
      | bytes |
      | 8192  |
      | 8193  |
