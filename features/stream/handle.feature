Feature: Everything the assistant puts into a chat goes through its turn's reply handle
  As a person in a chat with the assistant and with other people
  I want every frame of a reply to name its reply handle and the room version it opened at
  So that a person who came into the room later never receives a reply given before them

  The room version is 1 when a session's log starts and goes up by one with each
  participant-joined or participant-left frame. Each frame the assistant puts into the room (its
  text, its tool frames, its end) carries rid, "r" and its turn, and ver, the room version when
  the turn's handle opened (with the turn's first message). A viewer receives it only if they were
  in the room at that version and still are; anyone else gets a hidden frame with its cursor.
  Frames of a person and status frames carry neither.

  @profile:stream @req:ADR0052-G-06
  Scenario: In a chat of one every frame of a turn with a tool carries the same handle, and the person's frame none
    Given the tool "shell" answers {"block": {"kind": "terminal", "command": "ls", "output": "a.go\n", "exit": 0, "cwd": "/srv"}}
    And alice has started a conversation
    And the model calls "shell" with {"cmd": "ls"}
    And the model replies "Listed."
    When alice follows the session stream over WebSocket
    And alice sends "what is here?"
    Then alice's WebSocket reader got exactly these frames with their data:
      | cur | type          | author       | acts_for     | message | rid | ver | data                                                                                                                          |
      | 1   | user-message  | person:alice |              | m1      |     |     | {"message": "m1", "state": "sent", "text": "what is here?"}                                                                   |
      | 2   | tool-started  |              | person:alice |         | r1  | 1   | {"call": "call_1", "tool": "shell"}                                                                                           |
      | 3   | tool-finished |              | person:alice |         | r1  | 1   | {"call": "call_1", "tool": "shell", "ok": true, "block": {"kind": "terminal", "command": "ls", "output": "a.go\n", "exit": 0}} |
      | 4   | text-delta    |              | person:alice | a:1     | r1  | 1   | {"text": "Listed."}                                                                                                           |
      | 5   | text-done     |              | person:alice | a:1     | r1  | 1   | {"status": "complete", "text": "Listed."}                                                                                     |

  @profile:stream @req:ADR0052-G-06 @req:ADR0052-G-07
  Scenario: A person added mid-way receives the replies of handles opened from their joining on, and none before
    Given alice has started a shared conversation with bob
    And the model replies "Fine." to "check the pumps"
    And the model replies "Shut." to "and the valves"
    When alice follows the session stream over WebSocket
    And bob follows the session stream over WebSocket
    And alice sends "check the pumps"
    Then turn 1 is answered "Fine."
    When alice's WebSocket reader reaches cursor 3
    And alice adds carol to the participants
    And alice's WebSocket reader reaches cursor 4
    And carol sends "and the valves"
    Then turn 2 is answered "Shut."
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type               | author       | acts_for     | message | rid | ver | data                                            |
      | 1   | user-message       | person:alice |              | u:1     |     |     | {"message": "u:1", "state": "sent", "text": "check the pumps"} |
      | 2   | text-delta         |              | person:alice | a:1     | r1  | 1   | {"text": "Fine."}                               |
      | 3   | text-done          |              | person:alice | a:1     | r1  | 1   | {"status": "complete", "text": "Fine."}         |
      | 4   | participant-joined | person:alice |              |         |     |     | {"who": "person:carol", "by": "person:alice"}   |
      | 5   | user-message       | person:carol |              | u:3     |     |     | {"message": "u:3", "state": "sent", "text": "and the valves"} |
      | 6   | hidden             |              |              |         |     |     | {}                                              |
      | 7   | text-done          |              | person:carol | a:2     | r2  | 2   | {"status": "complete", "text": "Shut."}         |
    When bob reads the session stream over SSE from 0
    Then bob's SSE reader got exactly these frames with their data:
      | cur | type               | author       | acts_for     | message | rid | ver | data                                            |
      | 1   | user-message       | person:alice |              | u:1     |     |     | {"message": "u:1", "state": "sent", "text": "check the pumps"} |
      | 2   | hidden             |              |              |         |     |     | {}                                              |
      | 3   | text-done          |              | person:alice | a:1     | r1  | 1   | {"status": "complete", "text": "Fine."}         |
      | 4   | participant-joined | person:alice |              |         |     |     | {"who": "person:carol", "by": "person:alice"}   |
      | 5   | user-message       | person:carol |              | u:3     |     |     | {"message": "u:3", "state": "sent", "text": "and the valves"} |
      | 6   | hidden             |              |              |         |     |     | {}                                              |
      | 7   | text-done          |              | person:carol | a:2     | r2  | 2   | {"status": "complete", "text": "Shut."}         |
    When carol reads the session stream over SSE from 0
    Then carol's SSE reader got exactly these frames with their data:
      | cur | type               | author       | acts_for     | message | rid | ver | data                                            |
      | 1   | user-message       | person:alice |              | u:1     |     |     | {"message": "u:1", "state": "sent", "text": "check the pumps"} |
      | 2   | hidden             |              |              |         |     |     | {}                                              |
      | 3   | hidden             |              |              |         |     |     | {}                                              |
      | 4   | participant-joined | person:alice |              |         |     |     | {"who": "person:carol", "by": "person:alice"}   |
      | 5   | user-message       | person:carol |              | u:3     |     |     | {"message": "u:3", "state": "sent", "text": "and the valves"} |
      | 6   | text-delta         |              | person:carol | a:2     | r2  | 2   | {"text": "Shut."}                               |
      | 7   | text-done          |              | person:carol | a:2     | r2  | 2   | {"status": "complete", "text": "Shut."}         |

  @profile:stream @req:ADR0052-G-07
  Scenario: A person added while a reply is under way receives none of it, not even what comes after their joining
    Given alice has started a shared conversation with bob
    And the model streams "Checking" to "check the pumps" and waits
    When alice follows the session stream over WebSocket
    And alice sends "check the pumps"
    And the model has streamed its first words
    And alice's WebSocket reader reaches cursor 2
    And alice adds carol to the participants
    And alice's WebSocket reader reaches cursor 3
    And the model is released
    Then turn 1 is answered "Checking"
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type               | author       | acts_for     | message | rid | ver | data                                            |
      | 1   | user-message       | person:alice |              | u:1     |     |     | {"message": "u:1", "state": "sent", "text": "check the pumps"} |
      | 2   | text-delta         |              | person:alice | a:1     | r1  | 1   | {"text": "Checking"}                            |
      | 3   | participant-joined | person:alice |              |         |     |     | {"who": "person:carol", "by": "person:alice"}   |
      | 4   | text-done          |              | person:alice | a:1     | r1  | 1   | {"status": "complete", "text": "Checking"}      |
    When carol reads the session stream over SSE from 0
    Then carol's SSE reader got exactly these frames with their data:
      | cur | type               | author       | acts_for     | message | rid | ver | data                                            |
      | 1   | user-message       | person:alice |              | u:1     |     |     | {"message": "u:1", "state": "sent", "text": "check the pumps"} |
      | 2   | hidden             |              |              |         |     |     | {}                                              |
      | 3   | participant-joined | person:alice |              |         |     |     | {"who": "person:carol", "by": "person:alice"}   |
      | 4   | hidden             |              |              |         |     |     | {}                                              |

  @profile:stream @req:ADR0052-G-06 @crash
  Scenario: A replay after a restart gives every frame the rid and ver it had, and a turn after the restart its own
    Given alice has started a conversation
    And the model replies "Fine." to "check the pumps"
    And the model replies "Shut." to "and the valves"
    When alice sends "check the pumps"
    Then turn 1 is answered "Fine."
    When alice reads the session stream over SSE from 0
    And alice's SSE reader reaches cursor 3
    And the system is killed and restarted
    And alice sends "and the valves"
    Then turn 2 is answered "Shut."
    When alice reads the session stream over SSE from 0
    Then alice's SSE reader got exactly these frames with their data:
      | cur | type         | author       | acts_for     | message | rid | ver | data                                                          |
      | 1   | user-message | person:alice |              | m1     |     |     | {"message": "m1", "state": "sent", "text": "check the pumps"} |
      | 2   | text-delta   |              | person:alice | a:1     | r1  | 1   | {"text": "Fine."}                                             |
      | 3   | text-done    |              | person:alice | a:1     | r1  | 1   | {"status": "complete", "text": "Fine."}                       |
      | 4   | user-message | person:alice |              | m2     |     |     | {"message": "m2", "state": "sent", "text": "and the valves"}  |
      | 5   | text-delta   |              | person:alice | a:2     | r2  | 1   | {"text": "Shut."}                                             |
      | 6   | text-done    |              | person:alice | a:2     | r2  | 1   | {"status": "complete", "text": "Shut."}                       |

  @profile:stream @req:ADR0052-G-07 @crash
  Scenario: A reply under way across a restart keeps the version its handle opened at, so a person added before the restart receives none of it
    Given alice has started a shared conversation with bob
    And the model streams "first " "try" to "try it" one piece at a time
    And the model streams "second attempt" to "try it" one piece at a time
    When alice follows the session stream over WebSocket
    And alice sends "try it"
    And alice's WebSocket reader reaches cursor 2
    And alice adds carol to the participants
    And alice's WebSocket reader reaches cursor 3
    And the system is killed and restarted
    And alice's WebSocket reader reaches cursor 5
    And the model goes on after piece 1
    Then turn 1 is answered "second attempt"
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type               | author       | acts_for     | message | rid | ver | data                                                  |
      | 1   | user-message       | person:alice |              | u:1     |     |     | {"message": "u:1", "state": "sent", "text": "try it"} |
      | 2   | text-delta         |              | person:alice | a:1     | r1  | 1   | {"text": "first "}                                    |
      | 3   | participant-joined | person:alice |              |         |     |     | {"who": "person:carol", "by": "person:alice"}         |
      | 4   | status             |              |              |         |     |     | {"state": "restarted", "message": "a:1"}              |
      | 5   | text-delta         |              | person:alice | a:1     | r1  | 1   | {"text": "second attempt"}                            |
      | 6   | text-done          |              | person:alice | a:1     | r1  | 1   | {"status": "complete", "text": "second attempt"}      |
    When carol reads the session stream over SSE from 0
    Then carol's SSE reader got exactly these frames with their data:
      | cur | type               | author       | acts_for     | message | rid | ver | data                                                  |
      | 1   | user-message       | person:alice |              | u:1     |     |     | {"message": "u:1", "state": "sent", "text": "try it"} |
      | 2   | hidden             |              |              |         |     |     | {}                                                    |
      | 3   | participant-joined | person:alice |              |         |     |     | {"who": "person:carol", "by": "person:alice"}         |
      | 4   | status             |              |              |         |     |     | {"state": "restarted", "message": "a:1"}              |
      | 5   | hidden             |              |              |         |     |     | {}                                                    |
      | 6   | hidden             |              |              |         |     |     | {}                                                    |

  @profile:stream @req:ADR0052-G-07
  Scenario: A person removed from the chat cannot open its stream, and the others' replays keep every reply
    Given alice has started a shared conversation with bob
    And the model replies "Fine." to "check the pumps"
    When alice sends "check the pumps"
    Then turn 1 is answered "Fine."
    When alice removes bob from the participants
    Then bob opening the session stream gets the same 404 as for a missing session
    When alice reads the session stream over SSE from 0
    Then alice's SSE reader got exactly these frames with their data:
      | cur | type             | author       | acts_for     | message | rid | ver | data                                                           |
      | 1   | user-message     | person:alice |              | u:1     |     |     | {"message": "u:1", "state": "sent", "text": "check the pumps"} |
      | 2   | text-delta       |              | person:alice | a:1     | r1  | 1   | {"text": "Fine."}                                              |
      | 3   | text-done        |              | person:alice | a:1     | r1  | 1   | {"status": "complete", "text": "Fine."}                        |
      | 4   | participant-left | person:alice |              |         |     |     | {"who": "person:bob", "by": "person:alice"}                    |

  @profile:stream @req:ADR0052-G-07
  Scenario Outline: A person removed after opening the stream cannot connect with the ticket they were given (<transport>)
    Given alice has started a shared conversation with bob
    And the model replies "Fine." to "check the pumps"
    When alice sends "check the pumps"
    Then turn 1 is answered "Fine."
    When bob opens the session stream
    And alice removes bob from the participants
    Then bob presents the ticket over <transport> and gets the same 404 as for a missing session

    Examples:
      | transport |
      | WebSocket |
      | SSE       |

  @profile:stream @req:ADR0052-G-07
  Scenario: A person removed and added again receives no reply whose handle opened while they were out
    Given alice has started a shared conversation with bob
    And the model replies "Fine." to "check the pumps"
    And the model replies "Shut." to "and the valves"
    When alice removes bob from the participants
    And alice sends "check the pumps"
    Then turn 1 is answered "Fine."
    When alice adds bob to the participants
    And alice sends "and the valves"
    Then turn 2 is answered "Shut."
    When bob reads the session stream over SSE from 0
    Then bob's SSE reader got exactly these frames with their data:
      | cur | type               | author       | acts_for     | message | rid | ver | data                                                           |
      | 1   | participant-left   | person:alice |              |         |     |     | {"who": "person:bob", "by": "person:alice"}                    |
      | 2   | user-message       | person:alice |              | u:1     |     |     | {"message": "u:1", "state": "sent", "text": "check the pumps"} |
      | 3   | hidden             |              |              |         |     |     | {}                                                             |
      | 4   | hidden             |              |              |         |     |     | {}                                                             |
      | 5   | participant-joined | person:alice |              |         |     |     | {"who": "person:bob", "by": "person:alice"}                    |
      | 6   | user-message       | person:alice |              | u:3     |     |     | {"message": "u:3", "state": "sent", "text": "and the valves"}  |
      | 7   | hidden             |              |              |         |     |     | {}                                                             |
      | 8   | text-done          |              | person:alice | a:2     | r2  | 3   | {"status": "complete", "text": "Shut."}                        |
