Feature: Resuming a session stream from a cursor
  As a person whose screen lost its connection, or whose system restarted
  I want my screen to ask again from the last frame it holds and miss nothing
  So that what I read is whole and never shown twice, over any transport

  A reader holds one number, the cursor of the newest frame it delivered, and asks again from
  it. A stream sends every frame after the asked cursor, then every frame as it is logged, with
  nothing lost or repeated at the seam. A replay may merge a run of adjacent deltas of one
  message into one frame with its span and parts; a live frame is never merged; a reader trims a
  merged frame whose start it already holds. Frames are durable before they are sent, so a
  reader that resumes after the system was killed gets no gap and no repeat.

  @profile:stream @req:ADR0052-R-01
  Scenario: A reader that joins while a reply is streaming gets the replay, then the live frames, with nothing lost or repeated
    Given alice has started a conversation
    And the model streams "Pumps " "are " "fine" to "check the pumps" one piece at a time
    When alice follows the session stream over WebSocket
    And alice sends "check the pumps"
    And alice's WebSocket reader reaches cursor 2
    And the model goes on after piece 1
    And alice's WebSocket reader reaches cursor 3
    And alice follows the session stream over SSE
    And alice's SSE reader reaches cursor 3
    And the model goes on after piece 2
    And alice's SSE reader reaches cursor 4
    And the model goes on after piece 3
    Then alice's SSE reader folds the reply to turn 1 to "Pumps are fine"
    And alice's SSE reader received exactly these frames:
      | cur | span | type         | message | text                | verdict |
      | 1   |      | user-message | m1      | "check the pumps"   | deliver |
      | 3   | 2    | text-delta   | a:1     | "Pumps " + "are "   | deliver |
      | 4   |      | text-delta   | a:1     | "fine"              | deliver |
      | 5   |      | text-done    | a:1     | "Pumps are fine"    | deliver |
    And alice's SSE reader saw no gap and no repeat over one connection
    And alice's WebSocket reader received exactly these frames:
      | cur | span | type         | message | text                | verdict |
      | 1   |      | user-message | m1      | "check the pumps"   | deliver |
      | 2   |      | text-delta   | a:1     | "Pumps "            | deliver |
      | 3   |      | text-delta   | a:1     | "are "              | deliver |
      | 4   |      | text-delta   | a:1     | "fine"              | deliver |
      | 5   |      | text-done    | a:1     | "Pumps are fine"    | deliver |
    And alice's WebSocket reader saw no gap and no repeat over one connection

  @profile:stream @req:ADR0052-R-01
  Scenario: Readers that join while a reply streams piece after piece each get every frame exactly once
    Given alice has started a conversation
    And the model streams "one " "two " "three " "four " "five " "six " "seven " "eight " "nine " "ten" to "count to ten" one piece at a time
    When alice follows the session stream over WebSocket
    And alice sends "count to ten"
    And alice's WebSocket reader reaches cursor 2
    And the model goes on after every piece, one every 150 ms
    And alice follows the session stream over SSE
    And alice's other token follows the session stream over WebSocket
    Then alice's WebSocket reader folds the reply to turn 1 to "one two three four five six seven eight nine ten"
    And alice's SSE reader folds the reply to turn 1 to "one two three four five six seven eight nine ten"
    And alice's other token's WebSocket reader folds the reply to turn 1 to "one two three four five six seven eight nine ten"
    And alice's WebSocket reader saw no gap and no repeat over one connection
    And alice's SSE reader saw no gap and no repeat over one connection
    And alice's other token's WebSocket reader saw no gap and no repeat over one connection
    And every frame alice's SSE reader received has the frame's shape, with cursors gapless from 1
    And every frame alice's other token's WebSocket reader received has the frame's shape, with cursors gapless from 1
    And every frame alice's WebSocket reader received has the frame's shape, with cursors gapless from 1
    And alice's WebSocket reader received no merged frame

  @profile:stream @req:ADR0052-R-01
  Scenario: A reader that asks from inside a merged run trims what it already holds
    Given alice has started a conversation
    And the model streams "Pumps " "are " "fine" to "check the pumps" one piece at a time
    When alice follows the session stream over WebSocket
    And alice sends "check the pumps"
    And alice's WebSocket reader reaches cursor 2
    And the model goes on after piece 1
    And alice's WebSocket reader reaches cursor 3
    And the model goes on after piece 2
    And alice's WebSocket reader reaches cursor 4
    And the model goes on after piece 3
    And alice's WebSocket reader folds the reply to turn 1 to "Pumps are fine"
    And alice reads the session stream over SSE from 1 holding cursor 3
    Then alice's SSE reader received exactly these frames:
      | cur | span | type       | message | text                       | verdict |
      | 4   | 3    | text-delta | a:1     | "Pumps " + "are " + "fine" | trim    |
      | 5   |      | text-done  | a:1     | "Pumps are fine"           | deliver |
    And alice's SSE reader got exactly these frames:
      | cur | span | type       | message | text             |
      | 4   |      | text-delta | a:1     | "fine"           |
      | 5   |      | text-done  | a:1     | "Pumps are fine" |

  @profile:stream @req:ADR0052-R-04
  Scenario: SSE with Last-Event-ID serves exactly the frames the WebSocket serves
    Given alice has started a conversation
    And the model streams "Pumps " "are " "fine" to "check the pumps" one piece at a time
    When alice follows the session stream over WebSocket
    And alice sends "check the pumps"
    And alice's WebSocket reader reaches cursor 2
    And the model goes on after piece 1
    And alice's WebSocket reader reaches cursor 3
    And the model goes on after piece 2
    And alice's WebSocket reader reaches cursor 4
    And the model goes on after piece 3
    And alice's WebSocket reader folds the reply to turn 1 to "Pumps are fine"
    And alice's WebSocket reader stops
    And alice reads the session stream over WebSocket from 2
    And alice reads the session stream over SSE from 2
    Then alice's SSE reader got exactly these frames:
      | cur | span | type      | message | text             |
      | 4   | 2    | text-delta | a:1    | "are " + "fine"  |
      | 5   |      | text-done | a:1     | "Pumps are fine" |
    And alice's WebSocket reader and alice's SSE reader received the same frames

  @profile:stream @req:ADR0052-R-04 @crash
  Scenario Outline: A reader over <transport> resumes across a kill of the system with no gap, no repeat and the exact text
    Given alice has started a conversation
    And the model streams "first " "try" to "try it" one piece at a time
    And the model streams "second attempt" to "try it" one piece at a time
    When alice follows the session stream over <transport>
    And alice sends "try it"
    And alice's <transport> reader reaches cursor 2
    And the model goes on after piece 1
    And alice's <transport> reader reaches cursor 3
    And the system is killed and restarted
    And alice's <transport> reader reaches cursor 5
    And the model goes on after piece 1
    Then turn 1 is answered "second attempt"
    And alice's <transport> reader folds the reply to turn 1 to "second attempt"
    And alice's <transport> reader got exactly these frames:
      | cur | span | type         | message | text             |
      | 1   |      | user-message | m1      | "try it"         |
      | 2   |      | text-delta   | a:1     | "first "         |
      | 3   |      | text-delta   | a:1     | "try"            |
      | 4   |      | status       |         | restarted        |
      | 5   |      | text-delta   | a:1     | "second attempt" |
      | 6   |      | text-done    | a:1     | "second attempt" |
    And alice's <transport> reader saw no gap and no repeat over more than one connection
    And every frame alice's <transport> reader received has the frame's shape, with cursors gapless from 1

    Examples:
      | transport |
      | WebSocket |
      | SSE       |
