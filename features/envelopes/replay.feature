Feature: A conversation acts only on fresh envelopes it has not seen
  As the owner of a conversation whose agent runs with my authority
  I want it to obey each message my host signed once, and only recently
  So that nobody can replay a captured message into it

  A conversation keeps the ids of the envelopes it consumed in a replay set of bounded size; an
  envelope evicted from it raises a floor, and one issued at or before the floor is stale, so a
  flood never reopens a captured envelope. The set and its floor survive a rotation of the
  conversation, a rotation of the signing key and a restart. Freshness is judged when a message is
  received, not when it is taken up. In the tables an asker is written tenant/actor/onBehalfOf.

  @profile:envelope @req:ADR0122-D8-05
  Scenario: A captured envelope sent again is refused as a replay
    Given alice has started a conversation
    And alice sends "transfer the funds"
    And turn 1 is answered "re: transfer the funds"
    When alice captures the envelope of turn 1 from the log
    And alice puts the captured envelope into the conversation's inbox again
    And alice sends "are you still there?"
    Then turn 2 is answered "re: are you still there?"
    And the history holds:
      | ord | turn | role      | status   | text                     | reason   |
      | 1   | 1    | user      | accepted | transfer the funds       |          |
      | 2   | 1    | assistant | complete | re: transfer the funds   |          |
      | 3   | 0    | user      | rejected | -                        | replayed |
      | 4   | 2    | user      | accepted | are you still there?     |          |
      | 5   | 2    | assistant | complete | re: are you still there? |          |
    And the model has been asked 2 times in all

  @profile:envelope @req:ADR0122-D8-06 @configures
  Scenario: Flooding the replay set raises its floor and never reopens a captured envelope
    Given the setting "conversation.replaySetSize" is 8
    And alice has started a conversation
    And alice sends "transfer the funds"
    And turn 1 is answered "re: transfer the funds"
    And alice captures the envelope of turn 1 from the log
    When alice floods the conversation's inbox with 10 signed empty envelopes
    And alice puts the captured envelope into the conversation's inbox again
    And alice sends "are you still there?"
    Then turn 2 is answered "re: are you still there?"
    And the history holds:
      | ord | turn | role      | status   | text                     | reason    |
      | 1   | 1    | user      | accepted | transfer the funds       |           |
      | 2   | 1    | assistant | complete | re: transfer the funds   |           |
      | 3   | 0    | user      | rejected | -                        | malformed |
      | 4   | 0    | user      | rejected | -                        | malformed |
      | 5   | 0    | user      | rejected | -                        | malformed |
      | 6   | 0    | user      | rejected | -                        | malformed |
      | 7   | 0    | user      | rejected | -                        | malformed |
      | 8   | 0    | user      | rejected | -                        | malformed |
      | 9   | 0    | user      | rejected | -                        | malformed |
      | 10  | 0    | user      | rejected | -                        | malformed |
      | 11  | 0    | user      | rejected | -                        | malformed |
      | 12  | 0    | user      | rejected | -                        | malformed |
      | 13  | 0    | user      | rejected | -                        | stale     |
      | 14  | 2    | user      | accepted | are you still there?     |           |
      | 15  | 2    | assistant | complete | re: are you still there? |           |
    And the model has been asked 2 times in all

  @profile:envelope @req:ADR0122-D8-24 @configures
  Scenario: A captured envelope is still a replay after the conversation rotates
    Given the conversation rotates every 1 turn
    And alice has started a conversation
    And alice sends "transfer the funds"
    And turn 1 is answered "re: transfer the funds"
    And alice captures the envelope of turn 1 from the log
    And alice sends "and now?"
    And turn 2 is answered "re: and now?"
    When alice puts the captured envelope into the conversation's inbox again
    And alice sends "are you still there?"
    Then turn 3 is answered "re: are you still there?"
    And the history holds:
      | ord | turn | role      | status   | text                     | reason   |
      | 1   | 1    | user      | accepted | transfer the funds       |          |
      | 2   | 1    | assistant | complete | re: transfer the funds   |          |
      | 3   | 2    | user      | accepted | and now?                 |          |
      | 4   | 2    | assistant | complete | re: and now?             |          |
      | 5   | 0    | user      | rejected | -                        | replayed |
      | 6   | 3    | user      | accepted | are you still there?     |          |
      | 7   | 3    | assistant | complete | re: are you still there? |          |
    And the model has been asked 3 times in all

  @profile:envelope @req:ADR0122-D8-24 @configures
  Scenario: The replay floor a flood raised survives the conversation's rotation
    Given the setting "conversation.replaySetSize" is 8
    And the conversation rotates every 1 turn
    And alice has started a conversation
    And alice sends "transfer the funds"
    And turn 1 is answered "re: transfer the funds"
    And alice captures the envelope of turn 1 from the log
    And alice floods the conversation's inbox with 10 signed empty envelopes
    And alice sends "and now?"
    And turn 2 is answered "re: and now?"
    When alice puts the captured envelope into the conversation's inbox again
    And alice sends "are you still there?"
    Then turn 3 is answered "re: are you still there?"
    And the history holds:
      | ord | turn | role      | status   | text                     | reason    |
      | 1   | 1    | user      | accepted | transfer the funds       |           |
      | 2   | 1    | assistant | complete | re: transfer the funds   |           |
      | 3   | 0    | user      | rejected | -                        | malformed |
      | 4   | 0    | user      | rejected | -                        | malformed |
      | 5   | 0    | user      | rejected | -                        | malformed |
      | 6   | 0    | user      | rejected | -                        | malformed |
      | 7   | 0    | user      | rejected | -                        | malformed |
      | 8   | 0    | user      | rejected | -                        | malformed |
      | 9   | 0    | user      | rejected | -                        | malformed |
      | 10  | 0    | user      | rejected | -                        | malformed |
      | 11  | 0    | user      | rejected | -                        | malformed |
      | 12  | 0    | user      | rejected | -                        | malformed |
      | 13  | 2    | user      | accepted | and now?                 |           |
      | 14  | 2    | assistant | complete | re: and now?             |           |
      | 15  | 0    | user      | rejected | -                        | stale     |
      | 16  | 3    | user      | accepted | are you still there?     |           |
      | 17  | 3    | assistant | complete | re: are you still there? |           |
    And the model has been asked 3 times in all

  @profile:envelope @req:ADR0122-D8-06 @configures
  Scenario: Evicting an older envelope after a newer one keeps the floor at the newer one's issue time
    # spec/envelopes.md §6: an eviction sets the floor to max(floor, evicted iat), never lower. With
    # room for two ids, the third envelope evicts the first (issued 50 s ago: the floor) and the
    # fourth evicts the second (issued 100 s ago), which leaves the floor where it was; the first,
    # put again, is at the floor, so stale. Empty envelopes are consumed, then refused as malformed.
    Given the setting "conversation.replaySetSize" is 2
    And alice has started a conversation
    When alice puts these envelopes into the conversation's inbox in turn, capturing the first:
      | text | issued          |
      |      | 50 seconds ago  |
      |      | 100 seconds ago |
      |      | 80 seconds ago  |
      |      | 40 seconds ago  |
    And alice puts the captured envelope into the conversation's inbox again
    And alice sends "are you still there?"
    Then turn 1 is answered "re: are you still there?"
    And the history holds:
      | ord | turn | role      | status   | text                     | reason    |
      | 1   | 0    | user      | rejected | -                        | malformed |
      | 2   | 0    | user      | rejected | -                        | malformed |
      | 3   | 0    | user      | rejected | -                        | malformed |
      | 4   | 0    | user      | rejected | -                        | malformed |
      | 5   | 0    | user      | rejected | -                        | stale     |
      | 6   | 1    | user      | accepted | are you still there?     |           |
      | 7   | 1    | assistant | complete | re: are you still there? |           |
    And the model has been asked 1 time in all

  @profile:envelope @req:ADR0122-D8-24 @crash @configures
  Scenario: A captured envelope signed under the previous key is still a replay after a key rotation
    Given alice has started a conversation
    And alice sends "transfer the funds"
    And turn 1 is answered "re: transfer the funds"
    And alice captures the envelope of turn 1 from the log
    When the signing key is rotated, keeping the old one as a previous key, and the system restarted
    And alice puts the captured envelope into the conversation's inbox again
    And alice sends "are you still there?"
    Then turn 2 is answered "re: are you still there?"
    And the history holds:
      | ord | turn | role      | status   | text                     | reason   |
      | 1   | 1    | user      | accepted | transfer the funds       |          |
      | 2   | 1    | assistant | complete | re: transfer the funds   |          |
      | 3   | 0    | user      | rejected | -                        | replayed |
      | 4   | 2    | user      | accepted | are you still there?     |          |
      | 5   | 2    | assistant | complete | re: are you still there? |          |
    And the model has been asked 2 times in all

  @profile:envelope @req:ADR0122-D8-24 @crash @configures
  Scenario: A flood under the new key evicts an envelope of the old key for good
    Given the setting "conversation.replaySetSize" is 8
    And alice has started a conversation
    And alice sends "transfer the funds"
    And turn 1 is answered "re: transfer the funds"
    And alice captures the envelope of turn 1 from the log
    When the signing key is rotated, keeping the old one as a previous key, and the system restarted
    And alice floods the conversation's inbox with 10 signed empty envelopes
    And alice puts the captured envelope into the conversation's inbox again
    And alice sends "are you still there?"
    Then turn 2 is answered "re: are you still there?"
    And the history holds:
      | ord | turn | role      | status   | text                     | reason    |
      | 1   | 1    | user      | accepted | transfer the funds       |           |
      | 2   | 1    | assistant | complete | re: transfer the funds   |           |
      | 3   | 0    | user      | rejected | -                        | malformed |
      | 4   | 0    | user      | rejected | -                        | malformed |
      | 5   | 0    | user      | rejected | -                        | malformed |
      | 6   | 0    | user      | rejected | -                        | malformed |
      | 7   | 0    | user      | rejected | -                        | malformed |
      | 8   | 0    | user      | rejected | -                        | malformed |
      | 9   | 0    | user      | rejected | -                        | malformed |
      | 10  | 0    | user      | rejected | -                        | malformed |
      | 11  | 0    | user      | rejected | -                        | malformed |
      | 12  | 0    | user      | rejected | -                        | malformed |
      | 13  | 0    | user      | rejected | -                        | stale     |
      | 14  | 2    | user      | accepted | are you still there?     |           |
      | 15  | 2    | assistant | complete | re: are you still there? |           |
    And the model has been asked 2 times in all

  @profile:envelope @req:ADR0122-D8-04 @configures
  Scenario: Freshness is judged when a message is received, so a message queued behind a long turn does not go stale
    # spec/envelopes.md §5: now is the time the payload was received, not the time it is taken up.
    Given alice has started a conversation
    And the model replies "done" after a release
    When alice sends "first"
    And the model has been asked 1 time
    And alice puts an envelope saying "second" into the inbox and waits until its issue time is older than maxEnvelopeAgeMs
    And the model is released
    Then turn 1 is answered "done"
    And turn 2 is answered "re: second"
    And the history holds:
      | ord | turn | role      | status   | text        |
      | 1   | 1    | user      | accepted | first       |
      | 2   | 1    | assistant | complete | done        |
      | 3   | 2    | user      | accepted | second      |
      | 4   | 2    | assistant | complete | re: second  |

  @profile:envelope @req:ADR0122-D8-06 @configures
  Scenario: The replay floor is inclusive: an evicted envelope issued exactly at the floor is stale
    # The flood is issued at the captured envelope's own issue time, so the floor its eviction
    # raises equals that issue time (spec/envelopes.md §6: iat <= floor is stale); the two flood
    # envelopes put after that eviction are at the floor too.
    Given the setting "conversation.replaySetSize" is 8
    And alice has started a conversation
    And alice sends "transfer the funds"
    And turn 1 is answered "re: transfer the funds"
    And alice captures the envelope of turn 1 from the log
    When alice floods the conversation's inbox with 10 signed empty envelopes issued when the captured one was
    And alice puts the captured envelope into the conversation's inbox again
    And alice sends "are you still there?"
    Then turn 2 is answered "re: are you still there?"
    And the history holds:
      | ord | turn | role      | status   | text                     | reason    |
      | 1   | 1    | user      | accepted | transfer the funds       |           |
      | 2   | 1    | assistant | complete | re: transfer the funds   |           |
      | 3   | 0    | user      | rejected | -                        | malformed |
      | 4   | 0    | user      | rejected | -                        | malformed |
      | 5   | 0    | user      | rejected | -                        | malformed |
      | 6   | 0    | user      | rejected | -                        | malformed |
      | 7   | 0    | user      | rejected | -                        | malformed |
      | 8   | 0    | user      | rejected | -                        | malformed |
      | 9   | 0    | user      | rejected | -                        | malformed |
      | 10  | 0    | user      | rejected | -                        | malformed |
      | 11  | 0    | user      | rejected | -                        | stale     |
      | 12  | 0    | user      | rejected | -                        | stale     |
      | 13  | 0    | user      | rejected | -                        | stale     |
      | 14  | 2    | user      | accepted | are you still there?     |           |
      | 15  | 2    | assistant | complete | re: are you still there? |           |
    And the model has been asked 2 times in all

  @profile:envelope @req:ADR0122-D8-24 @crash @configures
  Scenario: A captured envelope is still a replay after a restart
    Given alice has started a conversation
    And alice sends "transfer the funds"
    And turn 1 is answered "re: transfer the funds"
    And alice captures the envelope of turn 1 from the log
    When the system is killed and restarted
    And alice puts the captured envelope into the conversation's inbox again
    And alice sends "are you still there?"
    Then turn 2 is answered "re: are you still there?"
    And the history holds:
      | ord | turn | role      | status   | text                     | reason   |
      | 1   | 1    | user      | accepted | transfer the funds       |          |
      | 2   | 1    | assistant | complete | re: transfer the funds   |          |
      | 3   | 0    | user      | rejected | -                        | replayed |
      | 4   | 2    | user      | accepted | are you still there?     |          |
      | 5   | 2    | assistant | complete | re: are you still there? |          |
    And the model has been asked 2 times in all
