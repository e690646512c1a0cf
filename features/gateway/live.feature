Feature: Live deltas are transient, attributed and caught up
  As someone watching a reply being written
  I want to see the words of my own turn as they come, and catch up if I join late
  So that the conversation feels live without the log ever holding anything but durable records

  Deltas belong to the turn whose model call produced them and go only to that conversation's
  streams. They are never journaled and never replayed. A client that attaches mid-reply gets the
  reply so far as a partial; the durable message supersedes it; a turn produced again after a
  restart is announced with a reset.

  @profile:gateway @req:ADR0122-D7-01
  Scenario: Two conversations streaming at once never see each other's deltas
    Given alice has started a conversation "A"
    And alice has started a conversation "B"
    And the model streams "alpha-1 " "alpha-2" to "question for A" and waits
    And the model streams "beta-1 " "beta-2" to "question for B" and waits
    When alice opens the event stream of conversation "A"
    And alice opens the event stream of conversation "B"
    And alice sends "question for A" to conversation "A"
    And alice sends "question for B" to conversation "B"
    Then the stream of conversation "A" shows "alpha-1 alpha-2"
    And the stream of conversation "B" shows "beta-1 beta-2"
    When the model is released
    And alice sends "that is all" to conversation "A"
    And alice sends "that is all" to conversation "B"
    Then the stream of conversation "A" got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text            |
      | status  |      |           |          |                 |
      | message | 1    | user      | accepted | question for A  |
      | delta   | 1    |           |          | "alpha-1 "      |
      | delta   | 1    |           |          | alpha-2         |
      | message | 1    | assistant | complete | alpha-1 alpha-2 |
    And the stream of conversation "B" got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text           |
      | status  |      |           |          |                |
      | message | 1    | user      | accepted | question for B |
      | delta   | 1    |           |          | "beta-1 "      |
      | delta   | 1    |           |          | beta-2         |
      | message | 1    | assistant | complete | beta-1 beta-2  |

  @profile:gateway @req:ADR0122-D7-02
  Scenario: A client that attaches mid-reply catches up with a partial, then the message supersedes it
    Given alice has started a conversation
    And the model streams "Let me " "check" and waits
    When alice sends "check the pumps"
    And the model has streamed its first words
    And alice opens the event stream
    Then alice's stream shows a partial "Let me check" for turn 1
    When the model is released
    Then alice's stream delivers the reply of turn 1 with the text "Let me check"
    When alice sends "that is all"
    Then alice's stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text            |
      | status  |      |           |          |                 |
      | message | 1    | user      | accepted | check the pumps |
      | partial | 1    |           |          | Let me check    |
      | message | 1    | assistant | complete | Let me check    |

  @profile:gateway @req:ADR0122-D7-02
  Scenario: A stream resumed after a turn's durable reply gets no partial of that turn
    # The durable reply supersedes the live text: once it is written the turn has no partial left,
    # so a stream resuming after it starts with the records that follow. The rejected empty message
    # is handled after the reply, so when it is in the history the turn's live phase is over.
    Given alice has started a conversation
    And the model streams "Let me " "check" and waits
    When alice opens the event stream
    And alice sends "check the pumps"
    And the model has streamed its first words
    And the model is released
    Then alice's stream delivers the reply of turn 1 with the text "Let me check"
    When alice closes her stream
    And alice sends an empty message
    Then record 3 is rejected with reason "malformed"
    When alice reconnects with the last event id she saw
    And alice sends "that is all"
    Then alice's new stream got exactly these events before the message of turn 2:
      | event   | turn | role | status   | text |
      | status  |      |      |          |      |
      | message | 0    | user | rejected |      |

  @profile:gateway @req:ADR0122-D7-01
  Scenario: A stream that stays open sees the live text of every turn, whoever else comes and goes
    Given alice has started a conversation
    And the model streams "first " "words" and waits
    When alice opens the event stream
    And alice sends "one"
    Then alice's stream shows "first words"
    When alice's other token opens the event stream
    And alice's other token closes her stream
    And the model is released
    Then turn 1 is answered "first words"
    Given the model streams "second " "words" and waits
    When alice sends "two"
    Then alice's stream shows "first wordssecond words"
    When the model is released
    Then turn 2 is answered "second words"
    When alice sends "that is all"
    Then alice's stream got exactly these events before the message of turn 3:
      | event   | turn | role      | status   | text         |
      | status  |      |           |          |              |
      | message | 1    | user      | accepted | one          |
      | delta   | 1    |           |          | "first "     |
      | delta   | 1    |           |          | words        |
      | message | 1    | assistant | complete | first words  |
      | message | 2    | user      | accepted | two          |
      | delta   | 2    |           |          | "second "    |
      | delta   | 2    |           |          | words        |
      | message | 2    | assistant | complete | second words |

  @profile:gateway @req:ADR0122-D7-03
  Scenario: Deltas are never journaled and never replayed
    Given alice has started a conversation
    And the model streams "one " "two " "three"
    When alice sends "count"
    Then turn 1 is answered "one two three"
    When alice opens the event stream
    Then alice's stream has delivered 2 messages
    When alice sends "again"
    Then alice's stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text          |
      | status  |      |           |          |               |
      | message | 1    | user      | accepted | count         |
      | message | 1    | assistant | complete | one two three |

  @profile:gateway @req:ADR0122-D7-04 @crash
  Scenario: A turn produced again after a restart is announced with a reset
    Given alice has started a conversation
    And the model streams "first attempt" and waits
    And the model streams "second attempt" and waits
    When alice sends "try it"
    And the model has streamed its first words
    And the system is killed and restarted
    And the model has been asked 2 times
    And alice opens the event stream
    Then alice's stream shows a reset of turn 1 before its partial
    When the model is released
    Then turn 1 is answered "second attempt"
    When alice sends "that is all"
    Then alice's stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text           |
      | status  |      |           |          |                |
      | message | 1    | user      | accepted | try it         |
      | reset   | 1    |           |          |                |
      | partial | 1    |           |          | second attempt |
      | message | 1    | assistant | complete | second attempt |

  @profile:gateway @req:ADR0122-D7-05
  Scenario: Two tenants streaming at once see only their own messages and deltas
    Given alice has started a conversation "A"
    And mallory has started a conversation "M"
    And the model streams "acme secret " "numbers" to "acme question" and waits
    And the model streams "evil plans " "ahead" to "evil question" and waits
    When alice opens the event stream of conversation "A"
    And mallory opens the event stream of conversation "M"
    And alice sends "acme question" to conversation "A"
    And mallory sends "evil question" to conversation "M"
    Then the stream of conversation "A" shows "acme secret numbers"
    And the stream of conversation "M" shows "evil plans ahead"
    When the model is released
    And alice sends "that is all" to conversation "A"
    And mallory sends "that is all" to conversation "M"
    Then the stream of conversation "A" got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text                |
      | status  |      |           |          |                     |
      | message | 1    | user      | accepted | acme question       |
      | delta   | 1    |           |          | "acme secret "      |
      | delta   | 1    |           |          | numbers             |
      | message | 1    | assistant | complete | acme secret numbers |
    And the stream of conversation "M" got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text             |
      | status  |      |           |          |                  |
      | message | 1    | user      | accepted | evil question    |
      | delta   | 1    |           |          | "evil plans "    |
      | delta   | 1    |           |          | ahead            |
      | message | 1    | assistant | complete | evil plans ahead |

  @profile:shared @req:ADR0122-D10-34 @configures
  Scenario Outline: In a shared conversation one participant holds at most half of maxSubscribers streams, rounded up: <share> of <limit>
    Given the setting "gateway.maxSubscribers" is <limit>
    And alice has started a shared conversation with bob
    When bob opens <share> event streams of the conversation
    And bob tries to open another event stream of the conversation
    Then the stream is refused with 429
    When alice opens <rest> event streams of the conversation
    And alice tries to open another event stream of the conversation
    Then the stream is refused with 429

    Examples:
      | limit | share | rest |
      | 2     | 1     | 1    |
      | 3     | 2     | 1    |
      | 4     | 2     | 2    |
