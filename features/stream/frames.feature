Feature: The session stream: frames with gapless cursors, drawn for each viewer
  As a person reading a conversation on a phone, a browser or a desk screen
  I want every screen to read the same typed frames, each with its cursor
  So that a screen always knows exactly what it holds and can ask for the rest

  A conversation's stream is a log of frames made from what the conversation records and
  streams: a sent message is a user-message, a reply its text-deltas and then its text-done.
  Each logged frame takes the next cursor of its session, from 1 with no gap; the control
  frames (reset, heartbeat) have cursor 0 and never move a reader. A stream opened for the
  first time is seeded from the conversation's history, oldest first. The log keeps a bounded
  number of frames: a reader asking from before its floor is told so with a reset.

  @profile:stream @req:ADR0052-F-01 @req:ADR0052-F-02 @configures
  Scenario: Every frame has its shape, the cursors run from 1, and an idle stream beats
    Given the setting "stream.heartbeatMs" is 200
    And alice has started a conversation
    And the model streams "Pumps " "are fine" to "check the pumps" one piece at a time
    When alice follows the session stream over WebSocket
    And alice sends "check the pumps"
    And alice's WebSocket reader reaches cursor 2
    And the model goes on after piece 1
    And alice's WebSocket reader reaches cursor 3
    And the model goes on after piece 2
    Then alice's WebSocket reader folds the reply to turn 1 to "Pumps are fine"
    And alice's WebSocket reader got exactly these frames:
      | cur | span | type         | message | text              |
      | 1   |      | user-message | m1      | "check the pumps" |
      | 2   |      | text-delta   | a:1     | "Pumps "          |
      | 3   |      | text-delta   | a:1     | "are fine"        |
      | 4   |      | text-done    | a:1     | "Pumps are fine"  |
    And every frame alice's WebSocket reader received has the frame's shape, with cursors gapless from 1
    And alice's WebSocket reader gets heartbeats every 200 ms while idle, each with cursor 0

  @profile:stream @req:ADR0052-R-03 @req:ADR0052-F-02
  Scenario: A first open seeds the stream from the stored history, oldest first
    Given alice has started a conversation
    And the model replies "Pumps are fine" to "check the pumps"
    And the model replies "Valves are shut" to "and the valves"
    When alice sends "check the pumps"
    And turn 1 is answered "Pumps are fine"
    And alice sends "and the valves"
    And turn 2 is answered "Valves are shut"
    And alice opens the session stream
    Then the open answer says head 6 and floor 1
    When alice reads the session stream over WebSocket from 0
    Then alice's WebSocket reader got exactly these frames:
      | cur | span | type         | message | text              |
      | 1   |      | user-message | m1      | "check the pumps" |
      | 2   |      | text-delta   | a:1     | "Pumps are fine"  |
      | 3   |      | text-done    | a:1     | "Pumps are fine"  |
      | 4   |      | user-message | m2      | "and the valves"  |
      | 5   |      | text-delta   | a:2     | "Valves are shut" |
      | 6   |      | text-done    | a:2     | "Valves are shut" |
    And alice's WebSocket reader folds the reply to turn 1 to "Pumps are fine"
    And alice's WebSocket reader folds the reply to turn 2 to "Valves are shut"
    And alice's WebSocket reader saw no gap and no repeat over one connection

  @profile:stream @req:ADR0052-R-02 @configures
  Scenario: Past stream.maxFrames the floor moves, and a reader from before it is reset
    Given the setting "stream.maxFrames" is 5
    And alice has started a conversation
    And the model replies "Pumps are fine" to "check the pumps"
    And the model replies "Valves are shut" to "and the valves"
    When alice sends "check the pumps"
    And turn 1 is answered "Pumps are fine"
    And alice sends "and the valves"
    And turn 2 is answered "Valves are shut"
    And alice opens the session stream
    Then the open answer says head 6 and floor 2
    When alice reads the session stream over WebSocket from 0
    Then alice's WebSocket reader got exactly these frames:
      | cur | span | type         | message | text              |
      | 0   |      | reset        |         | floor 2, head 6   |
      | 2   |      | text-delta   | a:1     | "Pumps are fine"  |
      | 3   |      | text-done    | a:1     | "Pumps are fine"  |
      | 4   |      | user-message | m2      | "and the valves"  |
      | 5   |      | text-delta   | a:2     | "Valves are shut" |
      | 6   |      | text-done    | a:2     | "Valves are shut" |
    And alice's WebSocket reader saw no gap and no repeat over one connection
    When alice reads the session stream over SSE from 1
    Then alice's SSE reader got exactly these frames:
      | cur | span | type         | message | text              |
      | 2   |      | text-delta   | a:1     | "Pumps are fine"  |
      | 3   |      | text-done    | a:1     | "Pumps are fine"  |
      | 4   |      | user-message | m2      | "and the valves"  |
      | 5   |      | text-delta   | a:2     | "Valves are shut" |
      | 6   |      | text-done    | a:2     | "Valves are shut" |

  @profile:stream @req:ADR0052-R-02 @configures
  Scenario: With exactly stream.maxFrames frames the floor stays at 1 and nobody is reset
    Given the setting "stream.maxFrames" is 6
    And alice has started a conversation
    And the model replies "Pumps are fine" to "check the pumps"
    And the model replies "Valves are shut" to "and the valves"
    When alice sends "check the pumps"
    And turn 1 is answered "Pumps are fine"
    And alice sends "and the valves"
    And turn 2 is answered "Valves are shut"
    And alice opens the session stream
    Then the open answer says head 6 and floor 1
    When alice reads the session stream over WebSocket from 0
    Then alice's WebSocket reader got exactly these frames:
      | cur | span | type         | message | text              |
      | 1   |      | user-message | m1      | "check the pumps" |
      | 2   |      | text-delta   | a:1     | "Pumps are fine"  |
      | 3   |      | text-done    | a:1     | "Pumps are fine"  |
      | 4   |      | user-message | m2      | "and the valves"  |
      | 5   |      | text-delta   | a:2     | "Valves are shut" |
      | 6   |      | text-done    | a:2     | "Valves are shut" |

  @profile:stream @req:ADR0052-V-01
  Scenario: A participant who did not ask a turn sees its live text as hidden frames with the same cursors
    Given alice has started a shared conversation with bob
    And the model streams "secret " "figures" to "show me the figures" one piece at a time
    When alice follows the session stream over WebSocket
    And bob follows the session stream over WebSocket
    And bob sends "show me the figures"
    And bob's WebSocket reader reaches cursor 2
    And the model goes on after piece 1
    And bob's WebSocket reader reaches cursor 3
    And alice's WebSocket reader reaches cursor 3
    And the model goes on after piece 2
    Then bob's WebSocket reader folds the reply to turn 1 to "secret figures"
    And bob's WebSocket reader got exactly these frames:
      | cur | span | type         | message | text                  |
      | 1   |      | user-message | u:1     | "show me the figures" |
      | 2   |      | text-delta   | a:1     | "secret "             |
      | 3   |      | text-delta   | a:1     | "figures"             |
      | 4   |      | text-done    | a:1     | "secret figures"      |
    And alice's WebSocket reader got exactly these frames:
      | cur | span | type         | message | text                  |
      | 1   |      | user-message | u:1     | "show me the figures" |
      | 2   |      | hidden       |         |                       |
      | 3   |      | hidden       |         |                       |
      | 4   |      | text-done    | a:1     | "secret figures"      |
    When alice reads the session stream over SSE from 0
    Then alice's SSE reader got exactly these frames:
      | cur | span | type         | message | text                  |
      | 1   |      | user-message | u:1     | "show me the figures" |
      | 3   | 2    | hidden       |         | 2 empty parts         |
      | 4   |      | text-done    | a:1     | "secret figures"      |

  @profile:stream @req:ADR0052-V-01
  Scenario: A session first opened mid-reply shows the part already streamed to its asker alone
    # bob's event stream showing the first piece is the sign that the system holds it before any
    # session stream is opened, so the first open logs it as one delta of the reply.
    Given alice has started a shared conversation with bob
    And the model streams "secret " "figures" to "show me the figures" one piece at a time
    When bob opens the event stream
    And bob sends "show me the figures"
    And bob's stream shows "secret "
    And alice follows the session stream over WebSocket
    And bob follows the session stream over WebSocket
    And alice's WebSocket reader reaches cursor 2
    And bob's WebSocket reader reaches cursor 2
    And the model goes on after piece 1
    And the model goes on after piece 2
    Then bob's WebSocket reader folds the reply to turn 1 to "secret figures"
    And bob's WebSocket reader got exactly these frames:
      | cur | span | type         | message | text                  |
      | 1   |      | user-message | u:1     | "show me the figures" |
      | 2   |      | text-delta   | a:1     | "secret "             |
      | 3   |      | text-delta   | a:1     | "figures"             |
      | 4   |      | text-done    | a:1     | "secret figures"      |
    And alice's WebSocket reader got exactly these frames:
      | cur | span | type         | message | text                  |
      | 1   |      | user-message | u:1     | "show me the figures" |
      | 2   |      | hidden       |         |                       |
      | 3   |      | hidden       |         |                       |
      | 4   |      | text-done    | a:1     | "secret figures"      |

  @profile:stream @req:ADR0052-R-02 @configures
  Scenario Outline: At the default bound of 4096 frames the floor is still 1, one more moves it
    Given the setting "gateway.postsPerMinute" is 100000
    And alice has started a conversation
    When alice fills the session's log with <lines> terminal lines
    And alice opens the session stream
    Then the open answer says head <lines> and floor <floor>

    Examples:
      | lines | floor |
      | 4096  | 1     |
      | 4097  | 2     |

  @profile:stream @req:ADR0052-F-03
  Scenario: A reply that fails after its text streamed is cut before its failed end
    Given alice has started a conversation
    And the model streams "Die Pumpen l" then fails with status 400
    When alice follows the session stream over WebSocket
    And alice sends "pumps?"
    Then turn 1 fails with reason "model-error"
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | message | data                                                                      |
      | 1   | user-message | person:alice | m1      | {"message": "m1", "state": "sent", "text": "pumps?"}                      |
      | 2   | text-delta   |              | a:1     | {"text": "Die Pumpen l"}                                                  |
      | 3   | text-cut     |              | a:1     | {"message": "a:1", "note": "the reply failed; what it streamed is not kept"} |
      | 4   | text-done    |              | a:1     | {"status": "failed", "text": "", "reason": "model-error"}                 |

  @profile:stream @req:ADR0052-F-03
  Scenario: A reply that fails before any text streamed, and one that ends well, have no cut
    Given alice has started a conversation
    And the model fails every call about "pumps?" with status 400
    And the model replies "Fine" to "and now?"
    When alice follows the session stream over WebSocket
    And alice sends "pumps?"
    Then turn 1 fails with reason "model-error"
    When alice sends "and now?"
    Then turn 2 is answered "Fine"
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | message | data                                                      |
      | 1   | user-message | person:alice | m1      | {"message": "m1", "state": "sent", "text": "pumps?"}      |
      | 2   | text-done    |              | a:1     | {"status": "failed", "text": "", "reason": "model-error"} |
      | 3   | user-message | person:alice | m2      | {"message": "m2", "state": "sent", "text": "and now?"}    |
      | 4   | text-delta   |              | a:2     | {"text": "Fine"}                                          |
      | 5   | text-done    |              | a:2     | {"status": "complete", "text": "Fine"}                    |

  @profile:stream @req:ADR0052-R-06 @configures
  Scenario: Past stream.maxBytes the floor moves too, the newest frame always kept
    Given the setting "stream.maxBytes" is 1
    And alice has started a conversation
    And the model replies "Pumps are fine" to "check the pumps"
    When alice sends "check the pumps"
    And turn 1 is answered "Pumps are fine"
    And alice opens the session stream
    Then the open answer says head 3 and floor 3
    When alice reads the session stream over WebSocket from 0
    Then alice's WebSocket reader got exactly these frames:
      | cur | span | type      | message | text             |
      | 0   |      | reset     |         | floor 3, head 3  |
      | 3   |      | text-done | a:1     | "Pumps are fine" |

  @profile:stream @req:ADR0052-F-01 @req:ADR0052-R-02 @configures
  Scenario: Over SSE a reset carries no event id, so a browser's reconnect never asks from 0
    Given the setting "stream.maxFrames" is 2
    And alice has started a conversation
    And the model replies "Pumps are fine" to "check the pumps"
    When alice sends "check the pumps"
    And turn 1 is answered "Pumps are fine"
    And alice reads the session stream over SSE from 0
    Then alice's SSE reader got exactly these frames:
      | cur | span | type       | message | text             |
      | 0   |      | reset      |         | floor 2, head 3  |
      | 2   |      | text-delta | a:1     | "Pumps are fine" |
      | 3   |      | text-done  | a:1     | "Pumps are fine" |

  @profile:stream @req:ADR0052-R-03
  Scenario: A session first opened after a participant's turn ended seeds its reply for everyone in the chat
    Given alice has started a shared conversation with bob
    And the model replies "Pumps are fine" to "check the pumps"
    When bob sends "check the pumps"
    And turn 1 is answered "Pumps are fine"
    And alice opens the session stream
    Then the open answer says head 3 and floor 1
    When alice reads the session stream over WebSocket from 0
    Then alice's WebSocket reader got exactly these frames:
      | cur | span | type         | message | text              |
      | 1   |      | user-message | u:1     | "check the pumps" |
      | 2   |      | text-delta   | a:1     | "Pumps are fine"  |
      | 3   |      | text-done    | a:1     | "Pumps are fine"  |
