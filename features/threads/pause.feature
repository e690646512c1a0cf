Feature: Pausing and revoking a connection
  As the owner of a connection to a peer box
  I want to pause it when the peer will not stop, unpause it later, and revoke it for good
  So that no agent of mine goes on talking with the peer while I do not want it to

  While a connection is paused its running turns are stopped, roles cannot send on it, text
  waiting to be sent fails, and text from the peer is rejected with paused; unpausing restarts
  nothing. Revoking is permanent. Only the owner pauses, unpauses or revokes. The texts waiting to
  be sent on a connection are bounded over all its agent conversations together.

  Background:
    Given the box is connected to the peer "lab"

  @profile:threads @req:ADR0035-P-01 @configures
  Scenario: A pause stops the running turn and rejects the peer's text; unpausing restarts nothing
    Given the model replies "Still working." to "Count every grain of sand" after a release
    And the model replies "Back again." to "Are you back?"
    When the peer sends "Count every grain of sand" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is running
    # The turn's model call is in flight (held) before the pause: running alone does not say so.
    And the model has been asked 1 time
    When "olga" pauses the connection "lab"
    Then the answer is the connection "lab" paused
    And turn 1 of thread "K" is stopped
    When the peer sends "Anybody there?" from "analyst" to "planner" on thread "K"
    Then the answer is 409 "paused"
    When the peer sends "A new topic" from "analyst" to "planner" on thread "N"
    Then the answer is 409 "paused"
    And nothing is stored on thread "N"
    When "olga" reads the connection "lab"
    Then the answer is the connection "lab" paused
    When "olga" unpauses the connection "lab"
    Then the answer is the connection "lab" open
    # The next text is the sentinel: an agent conversation has one turn at a time, and the next
    # turn takes every text waiting then (spec/peer.md, Receiving), so a turn the unpause started
    # would come before the turn of "Are you back?", and a text it gave again would be taken with it.
    When the peer sends "Are you back?" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 2 of thread "K" is completed
    And thread "K" has exactly 2 turns, the last of which took only "Are you back?"
    And the model has been asked 1 time for "Count every grain of sand"

  @profile:threads @req:ADR0035-P-01 @configures
  Scenario: While paused peer.send answers paused and a text waiting to be sent fails paused
    Given the peer holds the next text
    And the model answers "Ask twice" by sending {"to": "lab/analyst", "text": "first"} and {"to": "lab/analyst", "text": "second"}, then says "Asked twice."
    And the model answers "Ask while paused" by sending {"to": "lab/analyst", "text": "third"}, then says "Could not ask."
    And the model answers "Ask once more" by sending {"to": "lab/analyst", "text": "fourth"}, then says "Asked once more."
    When "alice" says "Ask twice" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message first}", "from": "planner", "to": "analyst", "text": "first"}
      """
    And the text "second" on thread "A" is queued
    When "olga" pauses the connection "lab"
    Then the answer is the connection "lab" paused
    And the text "second" on thread "A" is failed with "paused"
    When "alice" says "Ask while paused" to "planner"
    Then the peer.send results for "Ask while paused" are 0 sent and 1 "paused"
    When the peer releases the held texts
    And "olga" unpauses the connection "lab"
    Then the answer is the connection "lab" open
    # A later text of the same agent conversation is the sentinel: it is sent only after every
    # earlier one was delivered or failed (spec/peer.md, The wire). Had "second" gone out after
    # all, or "third" been queued, the peer would have had it before "fourth".
    When "alice" says "Ask once more" to "planner"
    Then the peer has received exactly 2 texts once "fourth" has arrived
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message fourth}", "from": "planner", "to": "analyst", "text": "fourth"}
      """

  @profile:threads @req:ADR0035-P-01 @configures
  Scenario: A text the peer answered 503 is not tried again once the pause failed it
    Given the peer holds the next text, then answers it with 503 "unavailable"
    And the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "first"}, then says "Asked."
    And the model answers "Ask once more" by sending {"to": "lab/analyst", "text": "fourth"}, then says "Asked once more."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message first}", "from": "planner", "to": "analyst", "text": "first"}
      """
    When "olga" pauses the connection "lab"
    Then the answer is the connection "lab" paused
    And the text "first" on thread "A" is failed with "paused"
    When the peer releases the held texts
    And "olga" unpauses the connection "lab"
    Then the answer is the connection "lab" open
    # A later text of the same agent conversation is the sentinel: it is sent only after every
    # earlier one was delivered or failed (spec/peer.md, The wire). Had "first" been tried again
    # after the pause failed it, the peer would have had it again before "fourth".
    When "alice" says "Ask once more" to "planner"
    Then the peer has received exactly 2 texts once "fourth" has arrived
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message fourth}", "from": "planner", "to": "analyst", "text": "fourth"}
      """
    And the text "first" on thread "A" is failed with "paused"

  @profile:threads @req:ADR0035-P-02 @configures
  Scenario: Revoking is permanent: the peer is rejected, sends answer connection, and pause and unpause are refused
    Given the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Could not ask."
    When "olga" revokes the connection "lab"
    Then the answer is the connection "lab" revoked
    When the peer sends "Hello planner" from "analyst" to "planner" on thread "K"
    Then the answer is 401 "connection"
    When "alice" says "Ask the analyst" to "planner"
    Then the peer.send results for "Ask the analyst" are 0 sent and 1 "connection"
    When "olga" pauses the connection "lab"
    Then the answer is 409 "revoked"
    When "olga" unpauses the connection "lab"
    Then the answer is 409 "revoked"
    When "olga" reads the connection "lab"
    Then the answer is the connection "lab" revoked
    # No sentinel: a revoked connection sends nothing more, so nothing is ordered after a send that
    # must not happen; the kit waits instead.
    And after 3 seconds the peer has still received 0 texts

  @profile:threads @req:ADR0035-P-02 @configures
  Scenario: Revoking fails the text waiting to be sent with connection
    Given the peer holds the next text
    And the model answers "Ask twice" by sending {"to": "lab/analyst", "text": "first"} and {"to": "lab/analyst", "text": "second"}, then says "Asked twice."
    When "alice" says "Ask twice" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message first}", "from": "planner", "to": "analyst", "text": "first"}
      """
    And the text "second" on thread "A" is queued
    When "olga" revokes the connection "lab"
    Then the answer is the connection "lab" revoked
    And the text "second" on thread "A" is failed with "connection"
    When the peer releases the held texts
    # No sentinel: a revoked connection sends nothing more; the kit waits instead.
    Then after 3 seconds the peer has still received 1 text

  @profile:threads @req:ADR0035-P-02 @configures
  Scenario: A text the peer answered 503 is not tried again once the revocation failed it
    Given the peer holds the next text, then answers it with 503 "unavailable"
    And the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "first"}, then says "Asked."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message first}", "from": "planner", "to": "analyst", "text": "first"}
      """
    When "olga" revokes the connection "lab"
    Then the answer is the connection "lab" revoked
    And the text "first" on thread "A" is failed with "connection"
    When the peer releases the held texts
    # No sentinel: nothing is sent on a revoked connection, so no later text can be ordered after
    # "first"; the kit waits instead, far longer than a try again after 503 takes.
    Then after 3 seconds the peer has still received 1 text
    And the text "first" on thread "A" is failed with "connection"

  @profile:threads @req:ADR0035-P-02
  Scenario: Only the owner pauses, unpauses, revokes or reads the connection
    When "alice" pauses the connection "lab"
    Then the answer is the uniform 404
    When "dana" pauses the connection "lab"
    Then the answer is the uniform 404
    When "dana" revokes the connection "lab"
    Then the answer is the uniform 404
    When "role:planner" unpauses the connection "lab"
    Then the answer is the uniform 404
    When "dana" reads the connection "lab"
    Then the answer is the uniform 404
    When "olga" reads the connection "lab"
    Then the answer is the connection "lab" open

  @profile:threads @req:ADR0035-P-03
  Scenario: The default bound: 64 texts wait, over every agent conversation of the connection, and the next is queue-full
    Given the peer holds every text
    And the model answers "Send the notes" by sending 65 texts at once to "lab/analyst" and "lab/critic" in turn, then says "Sent what I could."
    And the model answers "Send the last notes" by sending {"to": "lab/analyst", "text": "last for the analyst"} and {"to": "lab/critic", "text": "last for the critic"}, then says "Sent them."
    When "alice" says "Send the notes" to "planner"
    Then the peer.send results for "Send the notes" are 64 sent and 1 "queue-full"
    When the peer releases the held texts
    Then the peer has received 64 texts
    # A later text of each agent conversation is the sentinel: it is sent only after every earlier
    # one was delivered or failed (spec/peer.md, The wire). Had the refused note been queued after
    # all, the peer would have had it before the last note to its role.
    When "alice" says "Send the last notes" to "planner"
    Then the peer has received exactly 66 texts once "last for the analyst" and "last for the critic" have arrived
    And the peer found every text well-formed

  @profile:threads @req:ADR0035-P-03 @configures
  Scenario: A configured bound: 3 texts wait and the fourth is queue-full
    Given the connection "lab" holds at most 3 waiting texts
    And the peer holds every text
    And the model answers "Send the notes" by sending 4 texts at once to "lab/analyst" and "lab/critic" in turn, then says "Sent what I could."
    And the model answers "Send the last notes" by sending {"to": "lab/analyst", "text": "last for the analyst"} and {"to": "lab/critic", "text": "last for the critic"}, then says "Sent them."
    When "alice" says "Send the notes" to "planner"
    Then the peer.send results for "Send the notes" are 3 sent and 1 "queue-full"
    When the peer releases the held texts
    Then the peer has received 3 texts
    # The sentinels, as above: a later text of each agent conversation.
    When "alice" says "Send the last notes" to "planner"
    Then the peer has received exactly 5 texts once "last for the analyst" and "last for the critic" have arrived
    And the peer found every text well-formed

  @profile:threads @req:ADR0035-P-03 @configures @crash
  Scenario: The texts still waiting to be sent after a restart count against the bound
    Given the connection "lab" holds at most 3 waiting texts
    And the peer holds every text
    And the model answers "Send the notes" by sending 3 texts at once to "lab/analyst" and "lab/critic" in turn, then says "Sent them."
    And the model answers "Send one more" by sending {"to": "lab/critic", "text": "one more"}, then says "Could not send it."
    And the model answers "Send the last notes" by sending {"to": "lab/analyst", "text": "last for the analyst"} and {"to": "lab/critic", "text": "last for the critic"}, then says "Sent them."
    When "alice" says "Send the notes" to "planner"
    Then the peer.send results for "Send the notes" are 3 sent and 0 "queue-full"
    And the peer has received 2 texts
    # None of the three was delivered: each is sent again after the restart, and still waits.
    When the system is killed and restarted
    Then the peer has received 4 texts
    When "alice" says "Send one more" to "planner"
    Then the peer.send results for "Send one more" are 0 sent and 1 "queue-full"
    When the peer releases the held texts
    # The sentinels: a later text of each agent conversation, sent only after every earlier one was
    # delivered or failed (spec/peer.md, The wire). Had "one more" been queued, the peer would have
    # had it before "last for the critic".
    And "alice" says "Send the last notes" to "planner"
    Then the peer has received exactly 7 texts once "last for the analyst" and "last for the critic" have arrived
    And the peer found every text well-formed
