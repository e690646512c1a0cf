Feature: Threads in a session: replies to a message, and branches of a conversation
  As a person talking with the assistant, alone or with other people
  I want to answer one message in a thread, and to try a conversation again from one message
  So that a side question and its answer stay drawn beside what they answer, and a second try
  never changes the first

  A thread reply is a message sent with a parent: a message the session's log holds, a person's
  or a reply's. Its user-message frames carry the parent in their data, and so do the text-delta
  and text-done frames of the assistant's reply to it, on every replay, merged or not, after a
  restart and for every viewer who may see them. A parent the log does not hold is refused and
  nothing is logged or sent. A branch starts a new conversation of the caller's from one of the
  person's messages: the exchanges before it are copied, the message is asked again there, and
  the conversation it came from is not changed.

  @profile:stream @req:ADR0052-G-05 @crash
  Scenario: A thread reply and the reply to it carry the parent, live, replayed merged, and after a restart
    Given alice has started a conversation
    And the model replies "Fine." to "check the pumps"
    And the model streams "Yes, " "it is" to "and pump 5?" one piece at a time
    When alice follows the session stream over WebSocket
    And alice steers "check the pumps" as "m1"
    Then turn 1 is answered "Fine."
    When alice steers with the body {"text": "and pump 5?", "messageId": "m2", "parent": "a:1"}
    Then the session answers 202 {"messageId": "m2", "state": "sent"}
    When alice's WebSocket reader reaches cursor 5
    And the model goes on after piece 1
    And alice's WebSocket reader reaches cursor 6
    And the model goes on after piece 2
    Then turn 2 is answered "Yes, it is"
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | message | data                                                                  |
      | 1   | user-message | m1      | {"message": "m1", "state": "sent", "text": "check the pumps"}         |
      | 2   | text-delta   | a:1     | {"text": "Fine."}                                                     |
      | 3   | text-done    | a:1     | {"status": "complete", "text": "Fine."}                               |
      | 4   | user-message | m2      | {"message": "m2", "parent": "a:1", "state": "sent", "text": "and pump 5?"} |
      | 5   | text-delta   | a:2     | {"parent": "a:1", "text": "Yes, "}                                    |
      | 6   | text-delta   | a:2     | {"parent": "a:1", "text": "it is"}                                    |
      | 7   | text-done    | a:2     | {"parent": "a:1", "status": "complete", "text": "Yes, it is"}         |
    When alice reads the session stream over SSE from 0
    Then alice's SSE reader got exactly these frames with their data:
      | cur | span | type         | message | data                                                                  |
      | 1   |      | user-message | m1      | {"message": "m1", "state": "sent", "text": "check the pumps"}         |
      | 2   |      | text-delta   | a:1     | {"text": "Fine."}                                                     |
      | 3   |      | text-done    | a:1     | {"status": "complete", "text": "Fine."}                               |
      | 4   |      | user-message | m2      | {"message": "m2", "parent": "a:1", "state": "sent", "text": "and pump 5?"} |
      | 6   | 2    | text-delta   | a:2     | {"parent": "a:1", "parts": ["Yes, ", "it is"]}                        |
      | 7   |      | text-done    | a:2     | {"parent": "a:1", "status": "complete", "text": "Yes, it is"}         |
    When the system is killed and restarted
    And alice reads the session stream over SSE from 3
    Then alice's SSE reader got exactly these frames with their data:
      | cur | span | type         | message | data                                                                  |
      | 4   |      | user-message | m2      | {"message": "m2", "parent": "a:1", "state": "sent", "text": "and pump 5?"} |
      | 6   | 2    | text-delta   | a:2     | {"parent": "a:1", "parts": ["Yes, ", "it is"]}                        |
      | 7   |      | text-done    | a:2     | {"parent": "a:1", "status": "complete", "text": "Yes, it is"}         |

  @profile:stream @req:ADR0052-G-05 @crash
  Scenario: A thread reply sent just before a restart finds its parent when its turn is answered after it
    Given alice has started a conversation
    And the model replies "Fine." to "check the pumps"
    And the model streams "first " "try" to "and pump 5?" one piece at a time
    And the model replies "Yes." to "and pump 5?"
    When alice follows the session stream over WebSocket
    And alice steers "check the pumps" as "m1"
    Then turn 1 is answered "Fine."
    When alice steers with the body {"text": "and pump 5?", "messageId": "m2", "parent": "m1"}
    And alice's WebSocket reader reaches cursor 5
    And the system is killed and restarted
    And alice reads the session stream over SSE from 3
    And the model goes on after piece 1
    Then turn 2 is answered "Yes."
    And alice's SSE reader got exactly these frames with their data:
      | cur | span | type         | message | data                                                                       |
      | 4   |      | user-message | m2      | {"message": "m2", "parent": "m1", "state": "sent", "text": "and pump 5?"} |
      | 5   |      | text-delta   | a:2     | {"parent": "m1", "text": "first "}                                         |
      | 6   |      | status       |         | {"message": "a:2", "state": "restarted"}                                   |
      | 7   |      | text-delta   | a:2     | {"parent": "m1", "text": "Yes."}                                           |
      | 8   |      | text-done    | a:2     | {"parent": "m1", "status": "complete", "text": "Yes."}                     |

  @profile:stream @req:ADR0052-G-05
  Scenario: A thread reply that waits for the running turn keeps its parent while it waits, when picked up and in its reply
    Given alice has started a conversation
    And the model streams "working" to "first" one piece at a time
    And the model replies "noted" to "second"
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And alice steers with the body {"text": "second", "messageId": "m2", "parent": "m1"}
    Then the session answers 202 {"messageId": "m2", "state": "queued"}
    When the model goes on after piece 1
    Then turn 2 is answered "noted"
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | message | data                                                                   |
      | 1   | user-message | m1      | {"message": "m1", "state": "sent", "text": "first"}                    |
      | 2   | text-delta   | a:1     | {"text": "working"}                                                    |
      | 3   | user-message | m2      | {"message": "m2", "parent": "m1", "state": "queued", "text": "second"} |
      | 4   | text-done    | a:1     | {"status": "complete", "text": "working"}                              |
      | 5   | user-message | m2      | {"message": "m2", "parent": "m1", "state": "picked-up"}                |
      | 6   | user-message | m2      | {"message": "m2", "parent": "m1", "state": "sent", "text": "second"}   |
      | 7   | text-delta   | a:2     | {"parent": "m1", "text": "noted"}                                      |
      | 8   | text-done    | a:2     | {"parent": "m1", "status": "complete", "text": "noted"}                |

  @profile:stream @req:ADR0052-G-05
  Scenario: In a shared chat each viewer gets the parent on every frame they may see, and nothing of the ones they may not
    Given alice has started a shared conversation with bob
    And the model replies "Fine." to "check the pumps"
    And the model replies "Yes." to "and pump 5?"
    When alice follows the session stream over WebSocket
    And bob follows the session stream over WebSocket
    And alice steers "check the pumps" as "m1"
    Then turn 1 is answered "Fine."
    When bob steers with the body {"text": "and pump 5?", "messageId": "b1", "parent": "u:1"}
    Then the session answers 202 {"messageId": "b1", "state": "sent"}
    And turn 2 is answered "Yes."
    And bob's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | message | data                                                                       |
      | 1   | user-message | person:alice | u:1     | {"message": "u:1", "state": "sent", "text": "check the pumps"}            |
      | 2   | hidden       |              |         | {}                                                                         |
      | 3   | text-done    |              | a:1     | {"status": "complete", "text": "Fine."}                                    |
      | 4   | user-message | person:bob   | u:3     | {"message": "u:3", "parent": "u:1", "state": "sent", "text": "and pump 5?"} |
      | 5   | text-delta   |              | a:2     | {"parent": "u:1", "text": "Yes."}                                          |
      | 6   | text-done    |              | a:2     | {"parent": "u:1", "status": "complete", "text": "Yes."}                    |
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | message | data                                                                       |
      | 1   | user-message | person:alice | u:1     | {"message": "u:1", "state": "sent", "text": "check the pumps"}            |
      | 2   | text-delta   |              | a:1     | {"text": "Fine."}                                                          |
      | 3   | text-done    |              | a:1     | {"status": "complete", "text": "Fine."}                                    |
      | 4   | user-message | person:bob   | u:3     | {"message": "u:3", "parent": "u:1", "state": "sent", "text": "and pump 5?"} |
      | 5   | hidden       |              |         | {}                                                                         |
      | 6   | text-done    |              | a:2     | {"parent": "u:1", "status": "complete", "text": "Yes."}                    |

  @profile:stream @req:ADR0052-G-05
  Scenario: A thread reply sent again under its message id gives its parent to nothing else
    Given alice has started a shared conversation with bob
    And the model replies "Fine." to "check the pumps"
    And the model replies "Yes." to "and pump 5?"
    And the model replies "Sure." to "thanks"
    When alice follows the session stream over WebSocket
    And alice steers "check the pumps" as "m1"
    Then turn 1 is answered "Fine."
    When bob steers with the body {"text": "and pump 5?", "messageId": "b1", "parent": "u:1"}
    Then turn 2 is answered "Yes."
    When bob steers with the body {"text": "and pump 5?", "messageId": "b1", "parent": "u:1"}
    Then the session answers 202 {"messageId": "b1", "state": "sent"}
    When bob steers "thanks" as "b2"
    Then turn 3 is answered "Sure."
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | message | data                                                                        |
      | 1   | user-message | person:alice | u:1     | {"message": "u:1", "state": "sent", "text": "check the pumps"}             |
      | 2   | text-delta   |              | a:1     | {"text": "Fine."}                                                           |
      | 3   | text-done    |              | a:1     | {"status": "complete", "text": "Fine."}                                     |
      | 4   | user-message | person:bob   | u:3     | {"message": "u:3", "parent": "u:1", "state": "sent", "text": "and pump 5?"} |
      | 5   | hidden       |              |         | {}                                                                          |
      | 6   | text-done    |              | a:2     | {"parent": "u:1", "status": "complete", "text": "Yes."}                     |
      | 7   | user-message | person:bob   | u:5     | {"message": "u:5", "state": "sent", "text": "thanks"}                       |
      | 8   | hidden       |              |         | {}                                                                          |
      | 9   | text-done    |              | a:3     | {"status": "complete", "text": "Sure."}                                     |

  @profile:stream @req:ADR0052-G-05
  Scenario Outline: A parent the session's log does not hold (<what>) is refused naming parent, and nothing is logged or sent
    Given alice has started a conversation
    And the model replies "Fine." to "check the pumps"
    When alice steers "check the pumps" as "m1"
    Then turn 1 is answered "Fine."
    When alice steers with the body <body>
    Then the session answers 400 {"error": "bad request", "detail": "parent"}
    And the model was asked for exactly, in order:
      | last user message |
      | check the pumps   |
    When alice opens the session stream
    Then the open answer says head 3 and floor 1

    Examples:
      | what                  | body                                                                                      |
      | an unknown message    | {"text": "and pump 5?", "messageId": "m2", "parent": "m9"}                                |
      | a reply not yet given | {"text": "and pump 5?", "messageId": "m2", "parent": "a:2"}                               |
      | an empty id           | {"text": "and pump 5?", "messageId": "m2", "parent": ""}                                  |
      | a private message     | {"enc": {"alg": "mls-1", "kid": "k7", "ct": "AAEC"}, "messageId": "p1", "parent": "m1"}   |

  @profile:stream @req:ADR0052-S-11 @fresh-system
  Scenario: A branch starts a conversation of its own with the exchanges before the message, and asks the message again there
    Given alice has started a conversation
    And the model replies "ONE" to "one"
    And the model replies "TWO" to "two"
    And the model replies "DEUX" to "two"
    And the model replies "THREE" to "three"
    When alice steers "one" as "m1"
    Then turn 1 is answered "ONE"
    When alice steers "two" as "m2"
    Then turn 2 is answered "TWO"
    When alice steers "three" as "m3"
    Then turn 3 is answered "THREE"
    And alice remembers the history
    When alice branches the session at "m2" with the key "k1"
    Then the branch answers 201 with a new session of alice's, from the session, at "m2"
    And the model was asked for exactly, in order:
      | last user message |
      | one               |
      | two               |
      | three             |
      | two               |
    And request 4 to the model holds the messages:
      | role      | content |
      | user      | one     |
      | assistant | ONE     |
      | user      | two     |
    And the history is the remembered one, byte for byte
    When the scenario goes on in the branch
    Then alice sees the history:
      | ord | turn | role      | status   | asker | messageId | text |
      | 1   | 1    | user      | accepted | alice | m1        | one  |
      | 2   | 1    | assistant | complete | alice |           | ONE  |
      | 3   | 2    | user      | accepted | alice | k1        | two  |
      | 4   | 2    | assistant | complete | alice |           | DEUX |
    When alice follows the session stream over WebSocket
    Then alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | message | data                                                |
      | 1   | user-message | m1      | {"message": "m1", "state": "sent", "text": "one"}   |
      | 2   | text-delta   | a:1     | {"text": "ONE"}                                     |
      | 3   | text-done    | a:1     | {"status": "complete", "text": "ONE"}               |
      | 4   | user-message | k1      | {"message": "k1", "state": "sent", "text": "two"}   |
      | 5   | text-delta   | a:2     | {"text": "DEUX"}                                    |
      | 6   | text-done    | a:2     | {"status": "complete", "text": "DEUX"}              |
    When the scenario goes on in the original
    And alice reads the session stream over SSE from 0
    Then alice's SSE reader got exactly these frames with their data:
      | cur | type         | message | data                                                |
      | 1   | user-message | m1      | {"message": "m1", "state": "sent", "text": "one"}   |
      | 2   | text-delta   | a:1     | {"text": "ONE"}                                     |
      | 3   | text-done    | a:1     | {"status": "complete", "text": "ONE"}               |
      | 4   | user-message | m2      | {"message": "m2", "state": "sent", "text": "two"}   |
      | 5   | text-delta   | a:2     | {"text": "TWO"}                                     |
      | 6   | text-done    | a:2     | {"status": "complete", "text": "TWO"}               |
      | 7   | user-message | m3      | {"message": "m3", "state": "sent", "text": "three"} |
      | 8   | text-delta   | a:3     | {"text": "THREE"}                                   |
      | 9   | text-done    | a:3     | {"status": "complete", "text": "THREE"}             |

  @profile:stream @req:ADR0052-S-11 @fresh-system
  Scenario: The same key again answers the same and makes nothing more; the key of another branch is refused
    Given alice has started a conversation
    And the model replies "ONE" to "one"
    And the model replies "TWO" to "two"
    And the model replies "DEUX" to "two"
    When alice steers "one" as "m1"
    Then turn 1 is answered "ONE"
    When alice steers "two" as "m2"
    Then turn 2 is answered "TWO"
    When alice branches the session at "m2" with the key "k1"
    Then the branch answers 201 with a new session of alice's, from the session, at "m2"
    When alice branches the session at "m2" with the key "k1"
    Then the session answers exactly what the first branch answered
    When alice branches the session at "m1" with the key "k1"
    Then the session answers 409 {"error": "conflict", "reason": "key-reused"}
    And the model was asked for exactly, in order:
      | last user message |
      | one               |
      | two               |
      | two               |
    When the scenario goes on in the branch
    Then alice sees the history:
      | ord | turn | role      | status   | messageId | text |
      | 1   | 1    | user      | accepted | m1        | one  |
      | 2   | 1    | assistant | complete |           | ONE  |
      | 3   | 2    | user      | accepted | k1        | two  |
      | 4   | 2    | assistant | complete |           | DEUX |

  @profile:stream @req:ADR0052-S-11 @fresh-system
  Scenario: In a shared chat a person in it may branch at anyone's message, a delegate may not
    Given alice has started a shared conversation with bob and alice's delegate
    And the model replies "ONE" to "one"
    And the model replies "TWO" to "two"
    And the model replies "DEUX" to "two"
    When alice steers "one" as "m1"
    Then turn 1 is answered "ONE"
    When alice steers "two" as "m2"
    Then turn 2 is answered "TWO"
    When alice's delegate branches the session at "u:3" with the key "k1"
    Then the session answers 403 {"error": "delegation refused"}
    When bob branches the session at "u:3" with the key "k1"
    Then the branch answers 201 with a new session of bob's, from the session, at "u:3"
    And the model was asked for exactly, in order:
      | last user message |
      | one               |
      | two               |
      | two               |
    And request 3 to the model holds the messages:
      | role      | content |
      | user      | one     |
      | assistant | ONE     |
      | user      | two     |
    When the scenario goes on in the branch
    Then bob sees the history:
      | ord | turn | role      | status   | asker | text |
      | 1   | 1    | user      | accepted | alice | one  |
      | 2   | 1    | assistant | complete | alice | ONE  |
      | 3   | 2    | user      | accepted | bob   | two  |
      | 4   | 2    | assistant | complete | bob   | DEUX |

  @profile:stream @req:ADR0052-S-11 @fresh-system
  Scenario Outline: A branch <what> is refused by its reason and makes nothing
    Given alice has started a conversation
    And the model replies "ONE" to "one"
    When alice steers "one" as "m1"
    Then turn 1 is answered "ONE"
    When alice branches the session at "<message>" <key>
    Then the session answers <answer>
    And the model was asked for exactly, in order:
      | last user message |
      | one               |
    When alice opens the session stream
    Then the open answer says head 3 and floor 1

    Examples:
      | what                     | message | key                 | answer                                                      |
      | without a key            | m1      | without a key       | 400 {"error": "bad request", "detail": "Idempotency-Key"}   |
      | at a reply               | a:1     | with the key "k1"   | 404 {"error": "not found"}                                  |
      | at a message never sent  | m9      | with the key "k1"   | 404 {"error": "not found"}                                  |
