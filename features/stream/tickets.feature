Feature: Opening a session stream: who may read, and one-use tickets
  As the owner of a conversation
  I want a stream opened only for someone who may read it, with a ticket only they can use once
  So that a ticket seen by anyone else, or used once already, opens nothing

  An open decides who may read before it makes anything: a conversation the caller may not read
  answers exactly as one that does not exist, and no frame log is made for it. A permitted open
  answers a ticket, which the first presentation spends whatever its outcome; it is honoured only
  for its session, from its caller, on the device it names. A refused ticket is 401 with its
  reason. A ticket is good for 15 seconds unless the system is configured for less
  (`stream.ticketMs`): expiry is judged at a short setting, and the default once on each side of
  its 15 seconds (which takes that long).

  @profile:stream @req:ADR0052-O-01
  Scenario: Someone who may not read a conversation gets the uniform 404, and no frame log is made for it
    Given alice has started a conversation
    And the model replies "Pumps are fine" to "check the pumps"
    When alice sends "check the pumps"
    And turn 1 is answered "Pumps are fine"
    Then bob opening the session stream gets the same 404 as for a missing session
    And mallory opening the session stream gets the same 404 as for a missing session
    When alice opens the session stream
    Then the open answer says head 3 and floor 1
    When alice reads the session stream over WebSocket from 0
    Then alice's WebSocket reader got exactly these frames:
      | cur | span | type         | message | text              |
      | 1   |      | user-message | m1      | "check the pumps" |
      | 2   |      | text-delta   | a:1     | "Pumps are fine"  |
      | 3   |      | text-done    | a:1     | "Pumps are fine"  |

  @profile:stream @req:ADR0052-O-02
  Scenario Outline: A ticket serves one connection over <transport>
    Given alice has started a conversation
    When alice opens the session stream
    Then alice presents the ticket over <transport> and is served
    And alice presents the ticket over <transport> and is refused as "used"

    Examples:
      | transport |
      | WebSocket |
      | SSE       |

  @profile:stream @req:ADR0052-O-02
  Scenario: A ticket is its caller's alone, and whoever shows it first spends it
    Given alice has started a shared conversation with bob
    When alice opens the session stream
    Then bob presents the ticket over WebSocket and is refused as "caller"
    And alice presents the ticket over WebSocket and is refused as "used"
    When alice opens the session stream
    Then alice's other token presents the ticket over WebSocket and is served
    When alice opens the session stream
    Then alice at globex presents the ticket over WebSocket and is refused as "caller"
    And alice presents the ticket over WebSocket and is refused as "used"

  @profile:stream @req:ADR0052-O-02
  Scenario: A ticket that names a device is honoured on that device alone
    Given alice has started a conversation
    When alice opens the session stream on device "phone"
    Then alice presents the ticket over WebSocket on device "laptop" and is refused as "device"
    And alice presents the ticket over WebSocket on device "phone" and is refused as "used"
    When alice opens the session stream on device "phone"
    Then alice presents the ticket over WebSocket and is refused as "device"
    When alice opens the session stream on device "phone"
    Then alice presents the ticket over WebSocket on device "phone" and is served

  @profile:stream @req:ADR0052-O-02
  Scenario: A ticket never made, or made for another conversation, is unknown
    Given alice has started a conversation "A"
    And alice has started a conversation "B"
    Then alice presents a ticket never made over WebSocket for conversation "A" and is refused as "unknown"
    And alice presents a ticket never made over SSE for conversation "A" and is refused as "unknown"
    When alice opens the session stream of conversation "A"
    Then alice presents the ticket over WebSocket for conversation "B" and is refused as "unknown"
    And alice presents the ticket over WebSocket for conversation "A" and is refused as "used"

  @profile:stream @req:ADR0052-O-03 @configures
  Scenario: A ticket waits for its upgrade only as long as it is good for
    Given the setting "stream.ticketMs" is 300
    And alice has started a conversation
    When alice opens the session stream
    And the ticket is 450 ms old
    Then alice presents the ticket over WebSocket and is refused as "expired"
    And alice presents the ticket over WebSocket and is refused as "used"
    When alice opens the session stream
    Then alice presents the ticket over WebSocket and is served

  @profile:stream @req:ADR0052-O-03
  Scenario: With nothing configured a ticket is good for 15 seconds
    Given alice has started a conversation
    When alice opens the session stream
    Then the open answer says the ticket is good for 15 seconds

  @profile:stream @req:ADR0052-O-03
  Scenario: With nothing configured a ticket 14 seconds old is still honoured
    # Counted from when the open's answer arrived: the system made the ticket before that, so
    # it may be a little older on the system's clock. A refusal as "expired" is the system's
    # fault only while, on the kit's clock, 15 seconds have not passed since the open was sent.
    Given alice has started a conversation
    When alice opens the session stream
    And the ticket is 14000 ms old
    Then alice presents the ticket over WebSocket and is served

  @profile:stream @req:ADR0052-O-03
  Scenario: With nothing configured a ticket 15.5 seconds old is refused as expired
    Given alice has started a conversation
    When alice opens the session stream
    And the ticket is 15500 ms old
    Then alice presents the ticket over WebSocket and is refused as "expired"
