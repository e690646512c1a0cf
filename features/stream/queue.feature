Feature: A session's queue: how many messages wait, whose words they are, and who may stop a turn
  As a person in a chat with the assistant, alone or with others
  I want the queue to have a known bound, my waiting words kept to me, and my turn stopped only by me
  So that a flood of messages is refused plainly, and nobody else reads or cuts short what I asked

  At most 16 messages wait in one session's queue; one more is refused as too many requests and
  logs nothing. In a shared chat a waiting message's words are its sender's alone until the
  conversation records them: every other participant receives its frame hidden. Only the person
  who asked the running turn may stop it; anyone else gets the uniform 404 and nothing is logged.

  @profile:stream @req:ADR0052-S-08
  Scenario: Sixteen messages wait; the seventeenth is refused as too many requests and logs nothing
    Given alice has started a conversation
    And the model streams "working" to "first" one piece at a time
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And alice steers the messages "q1" to "q16", each answered 202 queued
    And alice steers "q17" as "q17"
    Then the session answers 429 {"error": "too many requests"}
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                           |
      | 1   | user-message | m1      | {"message":"m1","state":"sent","text":"first"} |
      | 2   | text-delta   | a:1     | {"text":"working"}                             |
      | 3   | user-message | q1      | {"message":"q1","state":"queued","text":"q1"}   |
      | 4   | user-message | q2      | {"message":"q2","state":"queued","text":"q2"}   |
      | 5   | user-message | q3      | {"message":"q3","state":"queued","text":"q3"}   |
      | 6   | user-message | q4      | {"message":"q4","state":"queued","text":"q4"}   |
      | 7   | user-message | q5      | {"message":"q5","state":"queued","text":"q5"}   |
      | 8   | user-message | q6      | {"message":"q6","state":"queued","text":"q6"}   |
      | 9   | user-message | q7      | {"message":"q7","state":"queued","text":"q7"}   |
      | 10  | user-message | q8      | {"message":"q8","state":"queued","text":"q8"}   |
      | 11  | user-message | q9      | {"message":"q9","state":"queued","text":"q9"}   |
      | 12  | user-message | q10     | {"message":"q10","state":"queued","text":"q10"} |
      | 13  | user-message | q11     | {"message":"q11","state":"queued","text":"q11"} |
      | 14  | user-message | q12     | {"message":"q12","state":"queued","text":"q12"} |
      | 15  | user-message | q13     | {"message":"q13","state":"queued","text":"q13"} |
      | 16  | user-message | q14     | {"message":"q14","state":"queued","text":"q14"} |
      | 17  | user-message | q15     | {"message":"q15","state":"queued","text":"q15"} |
      | 18  | user-message | q16     | {"message":"q16","state":"queued","text":"q16"} |
    When alice opens the session stream
    Then the open answer says head 18 and floor 1
    And the model was asked for exactly, in order:
      | last user message |
      | first             |

  @profile:stream @req:ADR0052-S-09
  Scenario: In a shared chat a waiting message's words reach its sender alone; the other sees its frame hidden
    Given alice has started a shared conversation with bob
    And the model streams "working" to "first" one piece at a time
    And the model replies "noted" to "second"
    When alice follows the session stream over WebSocket
    And bob follows the session stream over WebSocket
    And alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And alice steers "second" as "m2"
    Then the session answers 202 {"messageId": "m2", "state": "queued"}
    When bob's WebSocket reader reaches cursor 3
    And the model goes on after piece 1
    Then turn 2 is answered "noted"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | author       | state     | text      |
      | 1   | user-message | person:alice | sent      | "first"   |
      | 2   | text-delta   |              |           | "working" |
      | 3   | user-message | person:alice | queued    | "second"  |
      | 4   | text-done    |              | complete  | "working" |
      | 5   | user-message | person:alice | picked-up |           |
      | 6   | user-message | person:alice | sent      | "second"  |
      | 7   | text-delta   |              |           | "noted"   |
      | 8   | text-done    |              | complete  | "noted"   |
    And bob's WebSocket reader's frames are exactly:
      | cur | type         | author       | state     | text      |
      | 1   | user-message | person:alice | sent      | "first"   |
      | 2   | hidden       |              |           |           |
      | 3   | hidden       |              |           |           |
      | 4   | text-done    |              | complete  | "working" |
      | 5   | user-message | person:alice | picked-up |           |
      | 6   | user-message | person:alice | sent      | "second"  |
      | 7   | hidden       |              |           |           |
      | 8   | text-done    |              | complete  | "noted"   |
    When alice reads the session stream over SSE from 0
    And bob reads the session stream over SSE from 0
    Then alice's SSE reader's frames are exactly:
      | cur | type         | author       | state     | text      |
      | 1   | user-message | person:alice | sent      | "first"   |
      | 2   | text-delta   |              |           | "working" |
      | 3   | user-message | person:alice | queued    | "second"  |
      | 4   | text-done    |              | complete  | "working" |
      | 5   | user-message | person:alice | picked-up |           |
      | 6   | user-message | person:alice | sent      | "second"  |
      | 7   | text-delta   |              |           | "noted"   |
      | 8   | text-done    |              | complete  | "noted"   |
    And bob's SSE reader's frames are exactly:
      | cur | type         | author       | state     | text      |
      | 1   | user-message | person:alice | sent      | "first"   |
      | 2   | hidden       |              |           |           |
      | 3   | hidden       |              |           |           |
      | 4   | text-done    |              | complete  | "working" |
      | 5   | user-message | person:alice | picked-up |           |
      | 6   | user-message | person:alice | sent      | "second"  |
      | 7   | hidden       |              |           |           |
      | 8   | text-done    |              | complete  | "noted"   |

  @profile:stream @req:ADR0052-S-10 @configures
  Scenario: Without abort checkpoints another participant's stop is still the uniform 404: a stop tells a non-asker nothing
    Given barge-in is off
    And alice has started a shared conversation with bob
    And the model streams "working" to "first" one piece at a time
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And bob stops the running turn
    Then the session answers 404 {"error": "not found"}
    When alice stops the running turn
    Then the session answers 409 {"error": "conflict", "reason": "no-checkpoints"}
    When the model goes on after piece 1
    Then turn 1 is answered "working"
    When bob stops the running turn
    Then the session answers 409 {"error": "conflict", "reason": "idle"}

  @profile:stream @req:ADR0052-S-10 @configures
  Scenario: In a shared chat another participant's stop is the uniform 404 and logs nothing; the asker's stop works
    Given barge-in is on
    And alice has started a shared conversation with bob
    And the model streams "working" to "first" one piece at a time
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    And alice's WebSocket reader reaches cursor 2
    And bob stops the running turn
    Then the session answers 404 {"error": "not found"}
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | turn | data                                            |
      | 1   | user-message | u:1     | 1    | {"message":"u:1","state":"sent","text":"first"} |
      | 2   | text-delta   | a:1     | 1    | {"text":"working"}                              |
    When alice stops the running turn
    Then the session answers 202 {"turn": 1, "stopping": true}
    And turn 1 is interrupted with partial "working"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | turn | data                                            |
      | 1   | user-message | u:1     | 1    | {"message":"u:1","state":"sent","text":"first"} |
      | 2   | text-delta   | a:1     | 1    | {"text":"working"}                              |
      | 3   | status       |         | 1    | {"stopping":true}                               |
      | 4   | text-done    | a:1     | 1    | {"status":"interrupted","text":"working"}       |
    And the model was asked for exactly, in order:
      | last user message |
      | first             |
