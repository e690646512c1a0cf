Feature: Steering a session: messages that wait, are taken back, or stop the turn
  As a person talking to the assistant while it works
  I want what I send meanwhile to wait its turn, and to take it back or stop the work
  So that nothing I send is lost, sent twice, or pushed into a turn that is still running

  A message sent to a session while a turn runs waits: it is shown queued at once and picked up
  between turns, oldest first, then sent as the next turn with its own message id. Its sender may
  take it back while it waits. A stop is logged before the turn it stops ends. Who answers a
  message follows its mentions: a message for a person, or for another assistant, is the chat's
  and never a turn.

  @profile:stream @req:ADR0052-S-01 @req:ADR0052-S-02
  Scenario: Two messages sent while a turn runs wait, and are picked up one at a time between turns
    Given alice has started a conversation
    And the model streams "working" to "first" one piece at a time
    And the model streams "on-it" to "second" one piece at a time
    And the model replies "noted" to "third"
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    Then the session answers 202 {"messageId": "m1", "state": "sent"}
    When alice's WebSocket reader reaches cursor 2
    And alice steers "second" as "m2"
    Then the session answers 202 {"messageId": "m2", "state": "queued"}
    When alice steers "third" as "m3"
    Then the session answers 202 {"messageId": "m3", "state": "queued"}
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                              |
      | 1   | user-message | m1      | {"message":"m1","state":"sent","text":"first"}    |
      | 2   | text-delta   | a:1     | {"text":"working"}                                |
      | 3   | user-message | m2      | {"message":"m2","state":"queued","text":"second"} |
      | 4   | user-message | m3      | {"message":"m3","state":"queued","text":"third"}  |
    And the model was asked for exactly, in order:
      | last user message |
      | first             |
    When the model goes on after piece 1
    And alice's WebSocket reader reaches cursor 8
    Then alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                              |
      | 1   | user-message | m1      | {"message":"m1","state":"sent","text":"first"}    |
      | 2   | text-delta   | a:1     | {"text":"working"}                                |
      | 3   | user-message | m2      | {"message":"m2","state":"queued","text":"second"} |
      | 4   | user-message | m3      | {"message":"m3","state":"queued","text":"third"}  |
      | 5   | text-done    | a:1     | {"status":"complete","text":"working"}            |
      | 6   | user-message | m2      | {"message":"m2","state":"picked-up"}              |
      | 7   | user-message | m2      | {"message":"m2","state":"sent","text":"second"}   |
      | 8   | text-delta   | a:2     | {"text":"on-it"}                                  |
    And the model was asked for exactly, in order:
      | last user message |
      | first             |
      | second            |
    When the model goes on after piece 1
    Then turn 3 is answered "noted"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                              |
      | 1   | user-message | m1      | {"message":"m1","state":"sent","text":"first"}    |
      | 2   | text-delta   | a:1     | {"text":"working"}                                |
      | 3   | user-message | m2      | {"message":"m2","state":"queued","text":"second"} |
      | 4   | user-message | m3      | {"message":"m3","state":"queued","text":"third"}  |
      | 5   | text-done    | a:1     | {"status":"complete","text":"working"}            |
      | 6   | user-message | m2      | {"message":"m2","state":"picked-up"}              |
      | 7   | user-message | m2      | {"message":"m2","state":"sent","text":"second"}   |
      | 8   | text-delta   | a:2     | {"text":"on-it"}                                  |
      | 9   | text-done    | a:2     | {"status":"complete","text":"on-it"}              |
      | 10  | user-message | m3      | {"message":"m3","state":"picked-up"}              |
      | 11  | user-message | m3      | {"message":"m3","state":"sent","text":"third"}    |
      | 12  | text-delta   | a:3     | {"text":"noted"}                                  |
      | 13  | text-done    | a:3     | {"status":"complete","text":"noted"}              |
    And the model was asked for exactly, in order:
      | last user message |
      | first             |
      | second            |
      | third             |
    And request 3 to the model holds the messages:
      | role      | content |
      | user      | first   |
      | assistant | working |
      | user      | second  |
      | assistant | on-it   |
      | user      | third   |
    And alice's WebSocket reader saw no gap and no repeat over one connection

  @profile:stream @req:ADR0052-S-03
  Scenario: The sender takes back the first waiting message; again answers the same, and the next one is picked up
    Given alice has started a conversation
    And the model streams "working" to "first" one piece at a time
    And the model replies "noted" to "third"
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And alice steers "second" as "m2"
    And alice steers "third" as "m3"
    And alice takes back "m2"
    Then the session answers 200 {"messageId": "m2", "state": "cancelled"}
    When alice takes back "m2"
    Then the session answers 200 {"messageId": "m2", "state": "cancelled"}
    When the model goes on after piece 1
    Then turn 2 is answered "noted"
    When alice takes back "m3"
    Then the session answers 409 {"error": "conflict", "reason": "picked-up"}
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                              |
      | 1   | user-message | m1      | {"message":"m1","state":"sent","text":"first"}    |
      | 2   | text-delta   | a:1     | {"text":"working"}                                |
      | 3   | user-message | m2      | {"message":"m2","state":"queued","text":"second"} |
      | 4   | user-message | m3      | {"message":"m3","state":"queued","text":"third"}  |
      | 5   | user-message | m2      | {"message":"m2","state":"cancelled"}              |
      | 6   | text-done    | a:1     | {"status":"complete","text":"working"}            |
      | 7   | user-message | m3      | {"message":"m3","state":"picked-up"}              |
      | 8   | user-message | m3      | {"message":"m3","state":"sent","text":"third"}    |
      | 9   | text-delta   | a:2     | {"text":"noted"}                                  |
      | 10  | text-done    | a:2     | {"status":"complete","text":"noted"}              |
    And the model was asked for exactly, in order:
      | last user message |
      | first             |
      | third             |

  @profile:stream @req:ADR0052-S-03
  Scenario: The sender takes back the second waiting message; the first is answered, the taken-back one never is
    Given alice has started a conversation
    And the model streams "working" to "first" one piece at a time
    And the model replies "noted" to "second"
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And alice steers "second" as "m2"
    And alice steers "third" as "m3"
    And alice takes back "m3"
    Then the session answers 200 {"messageId": "m3", "state": "cancelled"}
    When the model goes on after piece 1
    Then turn 2 is answered "noted"
    When alice takes back "m3"
    Then the session answers 200 {"messageId": "m3", "state": "cancelled"}
    When alice takes back "m2"
    Then the session answers 409 {"error": "conflict", "reason": "picked-up"}
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                              |
      | 1   | user-message | m1      | {"message":"m1","state":"sent","text":"first"}    |
      | 2   | text-delta   | a:1     | {"text":"working"}                                |
      | 3   | user-message | m2      | {"message":"m2","state":"queued","text":"second"} |
      | 4   | user-message | m3      | {"message":"m3","state":"queued","text":"third"}  |
      | 5   | user-message | m3      | {"message":"m3","state":"cancelled"}              |
      | 6   | text-done    | a:1     | {"status":"complete","text":"working"}            |
      | 7   | user-message | m2      | {"message":"m2","state":"picked-up"}              |
      | 8   | user-message | m2      | {"message":"m2","state":"sent","text":"second"}   |
      | 9   | text-delta   | a:2     | {"text":"noted"}                                  |
      | 10  | text-done    | a:2     | {"status":"complete","text":"noted"}              |
    And the model was asked for exactly, in order:
      | last user message |
      | first             |
      | second            |

  @profile:stream @req:ADR0052-S-03
  Scenario: A taken-back message sent again under its id stays taken back: answered cancelled, logged once, never a turn
    Given alice has started a conversation
    And the model streams "working" to "first" one piece at a time
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And alice steers "second" as "m2"
    Then the session answers 202 {"messageId": "m2", "state": "queued"}
    When alice takes back "m2"
    Then the session answers 200 {"messageId": "m2", "state": "cancelled"}
    When alice steers "second" as "m2"
    Then the session answers 202 {"messageId": "m2", "state": "cancelled"}
    When the model goes on after piece 1
    Then turn 1 is answered "working"
    When alice steers "second" as "m2"
    Then the session answers 202 {"messageId": "m2", "state": "cancelled"}
    And the model was asked for exactly, in order:
      | last user message |
      | first             |
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                              |
      | 1   | user-message | m1      | {"message":"m1","state":"sent","text":"first"}    |
      | 2   | text-delta   | a:1     | {"text":"working"}                                |
      | 3   | user-message | m2      | {"message":"m2","state":"queued","text":"second"} |
      | 4   | user-message | m2      | {"message":"m2","state":"cancelled"}              |
      | 5   | text-done    | a:1     | {"status":"complete","text":"working"}            |
    And the status says the conversation is "open" after 1 turn

  @profile:stream @req:ADR0052-S-03 @crash
  Scenario: A taken-back message stays taken back across a restart: taking it back or sending it again answers cancelled and logs nothing
    Given alice has started a conversation
    And the model streams "working" to "first" one piece at a time
    And the model replies "noted" to "third"
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And alice steers "second" as "m2"
    And alice takes back "m2"
    Then the session answers 200 {"messageId": "m2", "state": "cancelled"}
    When the model goes on after piece 1
    Then turn 1 is answered "working"
    When alice's WebSocket reader reaches cursor 5
    And alice's WebSocket reader stops
    And the system is killed and restarted
    And alice takes back "m2"
    Then the session answers 200 {"messageId": "m2", "state": "cancelled"}
    When alice steers "second" as "m2"
    Then the session answers 202 {"messageId": "m2", "state": "cancelled"}
    When alice steers "third" as "m3"
    Then the session answers 202 {"messageId": "m3", "state": "sent"}
    And turn 2 is answered "noted"
    And the model was asked for exactly, in order:
      | last user message |
      | first             |
      | third             |
    When alice reads the session stream over WebSocket from 0
    Then alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                              |
      | 1   | user-message | m1      | {"message":"m1","state":"sent","text":"first"}    |
      | 2   | text-delta   | a:1     | {"text":"working"}                                |
      | 3   | user-message | m2      | {"message":"m2","state":"queued","text":"second"} |
      | 4   | user-message | m2      | {"message":"m2","state":"cancelled"}              |
      | 5   | text-done    | a:1     | {"status":"complete","text":"working"}            |
      | 6   | user-message | m3      | {"message":"m3","state":"sent","text":"third"}    |
      | 7   | text-delta   | a:2     | {"text":"noted"}                                  |
      | 8   | text-done    | a:2     | {"status":"complete","text":"noted"}              |

  @profile:stream @req:ADR0052-S-03
  Scenario: Another person cannot take back a waiting message: the uniform 404, and it is still answered
    Given alice has started a shared conversation with bob
    And the model streams "working" to "first" one piece at a time
    And the model replies "noted" to "second"
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And alice steers "second" as "m2"
    Then the session answers 202 {"messageId": "m2", "state": "queued"}
    And bob taking back "m2" gets the same 404 as for a message never sent
    When the model goes on after piece 1
    Then turn 2 is answered "noted"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | state     | text      |
      | 1   | user-message | sent      | "first"   |
      | 2   | text-delta   |           | "working" |
      | 3   | user-message | queued    | "second"  |
      | 4   | text-done    | complete  | "working" |
      | 5   | user-message | picked-up |           |
      | 6   | user-message | sent      | "second"  |
      | 7   | text-delta   |           | "noted"   |
      | 8   | text-done    | complete  | "noted"   |
    And the model was asked for exactly, in order:
      | last user message |
      | first             |
      | second            |

  @profile:stream @req:ADR0052-S-04 @crash
  Scenario: Messages waiting when the system is killed are each answered exactly once after the restart, with nobody reading
    Given alice has started a conversation
    And the model streams "working" to "first" one piece at a time
    And the model replies "done" to "first"
    And the model replies "noted" to "second"
    And the model replies "seen" to "third"
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And alice steers "second" as "m2"
    And alice steers "third" as "m3"
    And alice's WebSocket reader reaches cursor 4
    And alice's WebSocket reader stops
    And the system is killed and restarted
    Then turn 3 is answered "seen"
    And turn 2 is answered "noted"
    And turn 1 is answered "done"
    And the model was asked for exactly, in order:
      | last user message |
      | first             |
      | first             |
      | second            |
      | third             |
    When alice reads the session stream over WebSocket from 0
    Then alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                              |
      | 1   | user-message | m1      | {"message":"m1","state":"sent","text":"first"}    |
      | 2   | text-delta   | a:1     | {"text":"working"}                                |
      | 3   | user-message | m2      | {"message":"m2","state":"queued","text":"second"} |
      | 4   | user-message | m3      | {"message":"m3","state":"queued","text":"third"}  |
      | 5   | status       |         | {"message":"a:1","state":"restarted"}             |
      | 6   | text-delta   | a:1     | {"text":"done"}                                   |
      | 7   | text-done    | a:1     | {"status":"complete","text":"done"}               |
      | 8   | user-message | m2      | {"message":"m2","state":"picked-up"}              |
      | 9   | user-message | m2      | {"message":"m2","state":"sent","text":"second"}   |
      | 10  | text-delta   | a:2     | {"text":"noted"}                                  |
      | 11  | text-done    | a:2     | {"status":"complete","text":"noted"}              |
      | 12  | user-message | m3      | {"message":"m3","state":"picked-up"}              |
      | 13  | user-message | m3      | {"message":"m3","state":"sent","text":"third"}    |
      | 14  | text-delta   | a:3     | {"text":"seen"}                                   |
      | 15  | text-done    | a:3     | {"status":"complete","text":"seen"}               |

  @profile:stream @req:ADR0052-S-05 @configures
  Scenario: A stop is logged before the reply it interrupts, and the waiting message is picked up after it
    Given barge-in is on
    And alice has started a conversation
    And the model streams "working" to "first" one piece at a time
    And the model replies "noted" to "second"
    When alice follows the session stream over WebSocket
    And alice stops the running turn
    Then the session answers 409 {"error": "conflict", "reason": "idle"}
    When alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And alice steers "second" as "m2"
    And alice stops the running turn
    Then the session answers 202 {"turn": 1, "stopping": true}
    And turn 1 is interrupted with partial "working"
    And turn 2 is answered "noted"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | turn | data                                              |
      | 1   | user-message | m1      | 1    | {"message":"m1","state":"sent","text":"first"}    |
      | 2   | text-delta   | a:1     | 1    | {"text":"working"}                                |
      | 3   | user-message | m2      |      | {"message":"m2","state":"queued","text":"second"} |
      | 4   | status       |         | 1    | {"stopping":true}                                 |
      | 5   | text-done    | a:1     | 1    | {"status":"interrupted","text":"working"}         |
      | 6   | user-message | m2      |      | {"message":"m2","state":"picked-up"}              |
      | 7   | user-message | m2      | 2    | {"message":"m2","state":"sent","text":"second"}   |
      | 8   | text-delta   | a:2     | 2    | {"text":"noted"}                                  |
      | 9   | text-done    | a:2     | 2    | {"status":"complete","text":"noted"}              |
    And the model was asked for exactly, in order:
      | last user message |
      | first             |
      | second            |
    When alice stops the running turn
    Then the session answers 409 {"error": "conflict", "reason": "idle"}

  @profile:stream @req:ADR0052-S-05 @configures
  Scenario: Without abort checkpoints a stop is refused and the turn ends as it would
    Given barge-in is off
    And alice has started a conversation
    And the model streams "working" to "first" one piece at a time
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And alice stops the running turn
    Then the session answers 409 {"error": "conflict", "reason": "no-checkpoints"}
    When the model goes on after piece 1
    Then turn 1 is answered "working"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                           |
      | 1   | user-message | m1      | {"message":"m1","state":"sent","text":"first"} |
      | 2   | text-delta   | a:1     | {"text":"working"}                             |
      | 3   | text-done    | a:1     | {"status":"complete","text":"working"}         |

  @profile:stream @req:ADR0052-S-06
  Scenario: A message for a person or for another assistant is the chat's; one for assistant:loom is a turn
    Given alice has started a conversation
    And the model replies "here" to "and you?"
    When alice follows the session stream over WebSocket
    And alice steers "bob, look" as "m1" mentioning "person:bob"
    Then the session answers 202 {"messageId": "m1", "state": "sent"}
    When alice steers "kb?" as "m2" mentioning "assistant:kb"
    Then the session answers 202 {"messageId": "m2", "state": "sent"}
    When alice steers "and you?" as "m3" mentioning "assistant:kb", "assistant:loom"
    Then the session answers 202 {"messageId": "m3", "state": "sent"}
    And turn 1 is answered "here"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                                 |
      | 1   | user-message | m1      | {"message":"m1","state":"sent","text":"bob, look"}   |
      | 2   | mention      | m1      | {"message":"m1","who":["person:bob"]}                |
      | 3   | user-message | m2      | {"message":"m2","state":"sent","text":"kb?"}         |
      | 4   | mention      | m2      | {"message":"m2","who":["assistant:kb"]}              |
      | 5   | mention      | m3      | {"message":"m3","who":["assistant:kb","assistant:loom"]} |
      | 6   | user-message | m3      | {"message":"m3","state":"sent","text":"and you?"}    |
      | 7   | text-delta   | a:1     | {"text":"here"}                                      |
      | 8   | text-done    | a:1     | {"status":"complete","text":"here"}                  |
    And the model was asked for exactly, in order:
      | last user message |
      | and you?          |
    And request 1 to the model holds the messages:
      | role | content  |
      | user | and you? |
    And the status says the conversation is "open" after 1 turn

  @profile:stream @req:ADR0052-S-06
  Scenario Outline: A message with bad mentions (<what>) is refused naming mentions, and nothing is logged
    Given alice has started a conversation
    When alice steers with the body <body>
    Then the session answers 400 {"error": "bad request", "detail": "mentions"}
    And the model was asked for exactly, in order:
      | last user message |
    When alice opens the session stream
    Then the open answer says head 0 and floor 1

    Examples:
      | what              | body                                                                                                                                                                                                                                                      |
      | no kind           | {"text": "x", "messageId": "m1", "mentions": ["bob"]}                                                                                                                                                                                                     |
      | an empty id       | {"text": "x", "messageId": "m1", "mentions": ["person:"]}                                                                                                                                                                                                 |
      | an unknown kind   | {"text": "x", "messageId": "m1", "mentions": ["model:gpt"]}                                                                                                                                                                                               |
      | seventeen of them | {"text": "x", "messageId": "m1", "mentions": ["person:a1", "person:a2", "person:a3", "person:a4", "person:a5", "person:a6", "person:a7", "person:a8", "person:a9", "person:b1", "person:b2", "person:b3", "person:b4", "person:b5", "person:b6", "person:b7", "person:b8"]} |

  @profile:stream @req:ADR0052-S-06
  Scenario: A mention names one id exactly, and a mention of oneself is no person talking to a person
    Given alice has started a conversation
    And the model replies "noted" to "note to self"
    When alice follows the session stream over WebSocket
    And alice steers "LOOM?" as "m1" mentioning "assistant:LOOM"
    Then the session answers 202 {"messageId": "m1", "state": "sent"}
    When alice steers "loom2?" as "m2" mentioning "assistant:loom2"
    Then the session answers 202 {"messageId": "m2", "state": "sent"}
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                            |
      | 1   | user-message | m1      | {"message":"m1","state":"sent","text":"LOOM?"}  |
      | 2   | mention      | m1      | {"message":"m1","who":["assistant:LOOM"]}       |
      | 3   | user-message | m2      | {"message":"m2","state":"sent","text":"loom2?"} |
      | 4   | mention      | m2      | {"message":"m2","who":["assistant:loom2"]}      |
    And the model was asked for exactly, in order:
      | last user message |
    When alice steers "note to self" as "m3" mentioning "person:alice"
    Then the session answers 202 {"messageId": "m3", "state": "sent"}
    And turn 1 is answered "noted"
    And the model was asked for exactly, in order:
      | last user message |
      | note to self      |
    And the status says the conversation is "open" after 1 turn

  @profile:stream @req:ADR0052-S-13
  Scenario: The assistant's reply is speaking: another person's plain message after it is answered
    Given alice has started a shared conversation with bob
    And the model replies "here" to "hi"
    And the model replies "welcome" to "me too"
    When alice follows the session stream over WebSocket
    And alice steers "hi" as "m1"
    Then the session answers 202 {"messageId": "m1", "state": "sent"}
    And turn 1 is answered "here"
    When bob steers "me too" as "b1"
    Then the session answers 202 {"messageId": "b1", "state": "sent"}
    And turn 2 is answered "welcome"
    And the model was asked for exactly, in order:
      | last user message |
      | hi                |
      | me too            |
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | state    | text      |
      | 1   | user-message | sent     | "hi"      |
      | 2   | text-delta   |          | "here"    |
      | 3   | text-done    | complete | "here"    |
      | 4   | user-message | sent     | "me too"  |
      | 5   | hidden       |          |           |
      | 6   | text-done    | complete | "welcome" |

  @profile:stream @req:ADR0052-S-13
  Scenario: A person's message nobody answers is speaking: another person's plain message after it is the chat's, the sender's own next one is answered
    Given alice has started a shared conversation with bob
    And the model replies "none" to "anything else?"
    When alice follows the session stream over WebSocket
    And alice steers "bob, look" as "m1" mentioning "person:bob"
    Then the session answers 202 {"messageId": "m1", "state": "sent"}
    When bob steers "looking" as "b1"
    Then the session answers 202 {"messageId": "b1", "state": "sent"}
    When bob steers "anything else?" as "b2"
    Then the session answers 202 {"messageId": "b2", "state": "sent"}
    And turn 1 is answered "none"
    And the model was asked for exactly, in order:
      | last user message |
      | anything else?    |
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | state    | text             |
      | 1   | user-message | sent     | "bob, look"      |
      | 2   | mention      |          |                  |
      | 3   | user-message | sent     | "looking"        |
      | 4   | user-message | sent     | "anything else?" |
      | 5   | hidden       |          |                  |
      | 6   | text-done    | complete | "none"           |

  @profile:stream @req:ADR0052-S-13 @crash
  Scenario: The previous speaker is kept across a restart: a plain message that follows another person's is still the chat's
    Given alice has started a shared conversation with bob
    And the model replies "none" to "anything else?"
    When alice follows the session stream over WebSocket
    And alice steers "bob, look" as "m1" mentioning "person:bob"
    Then the session answers 202 {"messageId": "m1", "state": "sent"}
    When alice's WebSocket reader reaches cursor 2
    And alice's WebSocket reader stops
    And the system is killed and restarted
    And bob steers "looking" as "b1"
    Then the session answers 202 {"messageId": "b1", "state": "sent"}
    When bob steers "anything else?" as "b2"
    Then the session answers 202 {"messageId": "b2", "state": "sent"}
    And turn 1 is answered "none"
    And the model was asked for exactly, in order:
      | last user message |
      | anything else?    |
    When alice reads the session stream over WebSocket from 0
    Then alice's WebSocket reader's frames are exactly:
      | cur | type         | state    | text             |
      | 1   | user-message | sent     | "bob, look"      |
      | 2   | mention      |          |                  |
      | 3   | user-message | sent     | "looking"        |
      | 4   | user-message | sent     | "anything else?" |
      | 5   | hidden       |          |                  |
      | 6   | text-done    | complete | "none"           |

  @profile:stream @req:ADR0052-S-12
  Scenario: Edit and retry re-ask only the caller's own message; another person's is the uniform 404
    Given alice has started a shared conversation with bob
    And the model replies "Pumps are fine" to "check the pumps"
    When alice follows the session stream over WebSocket
    And alice sends "check the pumps"
    And turn 1 is answered "Pumps are fine"
    And bob edits "u:1" to "check pump 5" with the key "e1"
    Then the session answers 404 {"error": "not found"}
    When bob retries "u:1" with the key "e2"
    Then the session answers 404 {"error": "not found"}
    When alice adds alice at globex to the participants
    And alice at globex edits "u:1" to "check pump 5" with the key "e4"
    Then the session answers 404 {"error": "not found"}
    When alice at globex retries "u:1" with the key "e5"
    Then the session answers 404 {"error": "not found"}
    And the model was asked for exactly, in order:
      | last user message |
      | check the pumps   |
    When alice retries "u:1" with the key "e3"
    Then the session answers 202 {"messageId": "e3", "state": "sent"}
