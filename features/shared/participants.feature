Feature: A shared conversation: participants, turns run as their asker, filtered per viewer
  As the lead of an incident whose chat several responders share
  I want everyone in the room to ask the agent, each with their own authority,
  And each to see only what they are cleared for
  So that sharing a conversation never widens what anyone can reach or read

  A shared conversation has explicit participants, managed by its owner. Its coordinator runs as a
  host service principal; each turn runs as a separate execution owned by the participant who asked
  it, with their grants and their memory. Every answer is classified by the tools it called and the
  context it was built on, and every entry is shown to each viewer only if the host clears them for
  all of its classes; otherwise they see a bare placeholder.

  Background:
    Given the tools and their classes are:
      | tool    | class    |
      | logs    | incident |
      | payroll | hr       |
    And the clearances are:
      | viewer | classes                                    |
      | alice  | incident, hr, unclassified, memory:acme/bob |
      | bob    | incident                                   |

  @profile:shared @req:ADR0122-D10-09 @req:ADR0122-D10-08 @req:ADR0122-D10-13 @configures
  Scenario: Three responders, three views of one incident
    Given alice has started a shared conversation with bob and carol
    And the model calls "logs" with {"service": "pumps"}
    And the model replies "The pump logs show a pressure drop at 02:14."
    When bob sends "what do the pump logs say?"
    Then alice sees turn 1 answered "The pump logs show a pressure drop at 02:14."
    Given the model calls "payroll" with {"team": "night shift"}
    And the model replies "Three night-shift engineers were on call."
    When alice sends "who was on call?"
    Then alice sees turn 2 answered "Three night-shift engineers were on call."
    When carol sends "what happened tonight?"
    Then alice sees turn 3 answered "re: what happened tonight?"
    And alice sees the history:
      | ord | turn | role      | status   | asker | classes     | text                                          |
      | 1   | 1    | user      | accepted | bob   |             | what do the pump logs say?                    |
      | 2   | 1    | assistant | complete | bob   | incident    | The pump logs show a pressure drop at 02:14.  |
      | 3   | 2    | user      | accepted | alice | incident    | who was on call?                              |
      | 4   | 2    | assistant | complete | alice | hr incident | Three night-shift engineers were on call.     |
      | 5   | 3    | user      | accepted | carol |             | what happened tonight?                        |
      | 6   | 3    | assistant | complete | carol |             | re: what happened tonight?                    |
    And bob sees the history:
      | ord | turn | role      | status     | asker | text                                         |
      | 1   | 1    | user      | accepted   | bob   | what do the pump logs say?                   |
      | 2   | 1    | assistant | complete   | bob   | The pump logs show a pressure drop at 02:14. |
      | 3   | 2    | user      | accepted   | alice | who was on call?                             |
      | 4   | 2    | assistant | restricted | alice | -                                            |
      | 5   | 3    | user      | accepted   | carol | what happened tonight?                       |
      | 6   | 3    | assistant | complete   | carol | re: what happened tonight?                   |
    And carol sees the history:
      | ord | turn | role      | status     | asker | text                       |
      | 1   | 1    | user      | accepted   | bob   | what do the pump logs say? |
      | 2   | 1    | assistant | restricted | bob   | -                          |
      | 3   | 2    | user      | restricted | alice | -                          |
      | 4   | 2    | assistant | restricted | alice | -                          |
      | 5   | 3    | user      | accepted   | carol | what happened tonight?     |
      | 6   | 3    | assistant | complete   | carol | re: what happened tonight? |
    And the restricted entries carol sees carry only turn, role, status, cursor, ord, time and asker
    And the request to the model for "what happened tonight?" holds no earlier turns
    And request 3 to the model holds the messages:
      | role      | content                                      |
      | user      | what do the pump logs say?                   |
      | assistant | The pump logs show a pressure drop at 02:14. |
      | user      | who was on call?                             |
    And request 5 to the model holds the messages:
      | role | content                |
      | user | what happened tonight? |
    When bob sends "anything new?"
    Then alice sees turn 4 answered "re: anything new?"
    And request 6 to the model holds the messages:
      | role      | content                                      |
      | user      | what do the pump logs say?                   |
      | assistant | The pump logs show a pressure drop at 02:14. |
      | user      | what happened tonight?                       |
      | assistant | re: what happened tonight?                   |
      | user      | anything new?                                |

  @profile:shared @req:ADR0122-D10-08 @configures
  Scenario: An answer that called a tool without a declared class is classified unclassified
    # spec/requirements.yaml, ADR0122-D10-08: a tool without a class adds "unclassified"; bob is
    # not cleared for it, so he sees the answer as a placeholder.
    Given the tool "weather" is declared with no class
    And alice has started a shared conversation with bob
    And the model calls "weather" with {"city": "Oslo"}
    And the model replies "Sunny in Oslo."
    When alice sends "what is the weather?"
    Then alice sees turn 1 answered "Sunny in Oslo."
    And alice sees the history:
      | ord | turn | role      | status   | asker | classes      | text                 |
      | 1   | 1    | user      | accepted | alice |              | what is the weather? |
      | 2   | 1    | assistant | complete | alice | unclassified | Sunny in Oslo.       |
    And bob sees the history:
      | ord | turn | role      | status     | asker | text                 |
      | 1   | 1    | user      | accepted   | alice | what is the weather? |
      | 2   | 1    | assistant | restricted | alice | -                    |

  @profile:shared @req:ADR0122-D10-01 @req:ADR0122-D10-03 @configures
  Scenario: Participants are explicit and managed by the owner
    Given alice has started a shared conversation with bob
    Then dave gets the same 404 as for a missing conversation on every route
    When alice adds dave to the participants
    Then dave can read the conversation
    When bob removes carol from the participants
    Then the answer is 404 with error "not found"
    When alice removes alice from the participants
    Then the answer is 409 with error "conflict"
    When alice removes dave from the participants
    Then dave gets the same 404 as for a missing conversation on every route
    And the participants are alice, bob, each change recorded with who made it

  @profile:shared @req:ADR0122-D10-01 @configures
  Scenario Outline: An identity that differs from a participant's in one field alone is not a participant
    Given alice has started a shared conversation with bob
    And bob has had 1 turn answered
    Then <principal> gets the same 404 as for a missing conversation on every route
    And the history has 2 records

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-01 @configures
  Scenario: Another token that speaks for a participant's very identity is that participant
    Given alice has started a shared conversation with bob
    And bob has had 1 turn answered
    Then bob's other token is answered on every route exactly as bob is
    When bob's other token sends "from my phone"
    Then alice sees turn 2 answered "re: from my phone"

  @profile:shared @req:ADR0122-D10-01 @configures
  Scenario Outline: A participant who differs from the owner in one field alone cannot manage participants
    Given alice has started a shared conversation with <principal> and bob
    When <principal> adds dave to the participants
    Then the answer is 404 with error "not found"
    When <principal> removes bob from the participants
    Then the answer is 404 with error "not found"
    And dave gets the same 404 as for a missing conversation on every route
    And the participants are alice, <principal>, bob, each change recorded with who made it

    Examples:
      | principal              |
      | alice at evil          |
      | alice without a tenant |
      | alice for bob          |

  @profile:shared @req:ADR0122-D10-01 @configures
  Scenario Outline: A participant who differs from the owner in one field alone can be removed; the owner cannot
    Given alice has started a shared conversation with <principal> and bob
    When alice removes <principal> from the participants
    Then the answer is 200
    And <principal> gets the same 404 as for a missing conversation on every route
    When alice removes alice's other token from the participants
    Then the answer is 409 with error "conflict"
    And the participants are alice, bob, each change recorded with who made it

    Examples:
      | principal              |
      | alice at evil          |
      | alice without a tenant |
      | alice for bob          |

  @profile:shared @req:ADR0122-D10-01 @configures
  Scenario Outline: Identities that differ in one field alone are distinct participants
    Given alice has started a shared conversation with bob and <principal>
    And the participants are alice, bob, <principal>, each change recorded with who made it
    When alice adds <other> to the participants
    Then the answer is 200
    And <other> can read the conversation
    And the participants are alice, bob, <principal>, <other>, each change recorded with who made it

    Examples:
      | principal            | other                |
      | bob at evil          | bob without a tenant |
      | bob without a tenant | bob at evil          |
      | bob for carol        | bob at evil          |

  @profile:shared @req:ADR0122-D10-01 @configures
  Scenario: The owner's other token manages participants as the owner
    Given alice has started a shared conversation with bob
    When alice's other token adds dave to the participants
    Then the answer is 200
    And dave can read the conversation
    And the participants are alice, bob, dave, each change recorded with who made it

  @profile:shared @req:ADR0122-D10-01 @req:ADR0122-D10-04 @configures
  Scenario Outline: A participant change naming no valid identity, or no known operation, is refused and changes nothing
    Given alice has started a shared conversation with bob
    When alice changes the participants with <body>
    Then the answer is 400 with error "bad request"
    And the participants are alice, bob, each change recorded with who made it

    Examples:
      | body                                                                    |
      | {"op": "add", "identity": {"tenant": "acme", "actor": "loom-service"}} |
      | {"op": "add", "identity": {"tenant": "acme", "actor": ""}}             |
      | {"op": "promote", "identity": {"tenant": "acme", "actor": "dave"}}     |

  @profile:shared @req:ADR0122-D10-01 @configures
  Scenario: A conversation has at most maxParticipants participants
    Given the setting "shared.maxParticipants" is 3
    And alice has started a shared conversation with bob and carol
    When alice adds dave to the participants
    Then the answer is 400 with error "bad request"

  @profile:shared @req:ADR0122-D10-02 @configures
  Scenario: A removed participant's open stream ends at its next re-authorization
    Given the setting "gateway.reauthMs" is 100
    And alice has started a shared conversation with bob
    When bob opens the event stream
    And alice removes bob from the participants
    Then bob's stream ends

  @profile:shared @req:ADR0122-D10-01 @configures
  Scenario: A conversation has exactly maxParticipants participants at most, by default 100
    Given alice has started a shared conversation with 98 members
    When alice adds a new member to the participants
    Then the answer is 200
    When alice adds a new member to the participants
    Then the answer is 400 with error "bad request"
    And the conversation has 100 participants

  @profile:shared @req:ADR0122-D10-01 @configures
  Scenario: A conversation starts with exactly maxParticipants participants at most, by default 100
    When alice starts a shared conversation with 100 members
    Then the answer is 400 with error "bad request"
    When alice starts a shared conversation with 99 members
    Then the answer is 201
    And the conversation has 100 participants

  @profile:shared @req:ADR0122-D10-01 @configures
  Scenario: A conversation has exactly maxParticipants participants at most, as configured
    Given the setting "shared.maxParticipants" is 4
    And alice has started a shared conversation with 2 members
    When alice adds a new member to the participants
    Then the answer is 200
    When alice adds a new member to the participants
    Then the answer is 400 with error "bad request"
    And the conversation has 4 participants

  @profile:shared @req:ADR0122-D10-02 @configures
  Scenario Outline: Removing an identity that differs from a participant's in one field alone leaves the participant's stream open
    Given the setting "gateway.reauthMs" is 100
    And alice has started a shared conversation with bob and <principal>
    When bob opens the event stream
    And alice removes <principal> from the participants
    And 5 re-authorization periods pass
    And alice sends "still there?"
    Then bob's stream delivers the reply of turn 1 with the text "re: still there?"

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-02 @configures
  Scenario: Removing a participant by another token's identity ends their open stream
    Given the setting "gateway.reauthMs" is 100
    And alice has started a shared conversation with bob
    When bob opens the event stream
    And alice removes bob's other token from the participants
    Then bob's stream ends

  @profile:shared @req:ADR0122-D10-04 @configures
  Scenario: The coordinator runs as the host's service principal, which no end user may be
    When the service starts a conversation in shared mode
    Then the answer is 400 with error "bad request"
    When alice starts a shared conversation with the service
    Then the answer is 400 with error "bad request"
    Given alice has started a shared conversation with bob
    And alice has had 1 turn answered
    Then the service gets the same 404 as for a missing conversation on the conversation routes
    And alice cannot read the log of alice's conversation
    And bob cannot read the log of alice's conversation

  @profile:shared @req:ADR0122-D10-04 @configures
  Scenario Outline: Only the service principal's very identity is barred, whatever token carries it
    When <principal> starts a conversation in shared mode
    Then the answer is <as owner>
    When alice starts a shared conversation with <principal>
    Then the answer is <as participant>

    Examples:
      | principal                    | as owner                     | as participant               |
      | the service's other token    | 400 with error "bad request" | 400 with error "bad request" |
      | the service at evil          | 201                          | 201                          |
      | the service without a tenant | 201                          | 201                          |
      | the service for alice        | 201                          | 201                          |

  @profile:shared @req:ADR0122-D10-04 @configures
  Scenario: Another token of the service principal is no viewer either
    Given alice has started a shared conversation with bob
    And alice has had 1 turn answered
    Then the service's other token gets the same 404 as for a missing conversation on the conversation routes

  @profile:shared @req:ADR0122-D10-07 @configures
  Scenario Outline: Only the very delegation the host maps may ask
    Given the setting "shared.narrowed" is ["acme/assistant~alice"]
    And alice has started a shared conversation with alice's delegate and <delegate>
    When <delegate> tries to send "do it"
    Then the answer is 403 with error "delegation refused"
    When alice's delegate sends "do it for alice"
    Then alice sees turn 1 answered "re: do it for alice"

    Examples:
      | delegate                        |
      | the assistant for bob           |
      | the assistant at evil for alice |

  @profile:shared @req:ADR0122-D10-05 @configures
  Scenario: Each turn runs as its asker, under an unguessable id shown to the asker alone
    Given alice has started a shared conversation with bob
    When bob sends "check pump 7"
    Then alice sees turn 1 answered "re: check pump 7"
    And bob sees that his answer to turn 1 ran as the turn execution the host key names for message 1
    And alice sees no turn execution id on turn 1

  @profile:shared @req:ADR0122-D10-05 @configures
  Scenario: An execution planted at a turn's id is refused, never adopted
    Given alice has started a shared conversation with bob
    And the model replies "I transferred the funds." to "PLANTED"
    When bob plants a turn execution at the id of message 1, saying "PLANTED"
    And alice sends "what is the pump status?"
    Then alice's turn 1 fails with reason "turn-failed"
    And no record holds "I transferred the funds."
    And the error hook was told why turn 1 failed

  @profile:shared @req:ADR0122-D10-40 @configures
  Scenario: A turn execution a participant starts for the conversation puts nothing into anyone's stream
    Bob may touch the conversation, so the runtime door may start it; it is still not a turn the
    conversation runs, and its model's words reach no stream, not even bob's own.

    Given alice has started a shared conversation with bob
    And the model streams "her " "words" to "sentinel" and waits
    And the model replies "INJECTED TEXT" to "injected"
    When alice opens the event stream
    And bob opens the event stream
    And bob starts a turn execution for turn 1 of the conversation through the runtime door, saying "injected"
    And that turn execution has been refused, or its model call has ended
    And alice sends "sentinel"
    Then alice's stream shows "her words"
    When the model is released
    Then alice sees turn 1 answered "her words"
    And bob's stream delivers the reply of turn 1 with the text "her words"
    When alice sends "that is all"
    Then alice's stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text      |
      | status  |      |           |          |           |
      | message | 1    | user      | accepted | sentinel  |
      | delta   | 1    |           |          | "her "    |
      | delta   | 1    |           |          | words     |
      | message | 1    | assistant | complete | her words |
    And bob's stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text      |
      | status  |      |           |          |           |
      | message | 1    | user      | accepted | sentinel  |
      | message | 1    | assistant | complete | her words |

  @profile:shared @req:ADR0122-D10-05 @configures
  Scenario Outline: An execution the asker planted at their own turn's id is refused, never adopted
    Alice starts it as herself, naming herself the asker, so only the turn's own fields (its
    number, the message it answers, the text) can tell it from her real turn. The kit sends her
    message with the message id "m1"; the message the turn answers is the envelope the host mints
    for it, which a planter cannot know in advance.

    Given alice has started a shared conversation with bob
    And the model replies "I transferred the funds." to "PLANTED"
    When alice plants a turn execution at the id of message 1 for turn <turn>, message id "<message id>" and text "<text>", whose model is told "<told>"
    And alice sends "what is the pump status?"
    Then alice's turn 1 fails with reason "turn-failed"
    And no record holds "I transferred the funds."

    Examples:
      | turn | message id | text                     | told    |
      | 2    | m1         | what is the pump status? | PLANTED |
      | 1    | planted    | what is the pump status? | PLANTED |
      | 1    | m1         | what is the pump status! | PLANTED |
      | 1    | m1         | what is the pump status? | PLANTED |

  @profile:shared @req:ADR0122-D10-06 @configures
  Scenario: A tool the asker has no grant for is denied inside their turn
    Given the setting "shared.grants" is {"acme/bob": ["lookup"]}
    And alice has started a shared conversation with bob
    And the model calls "logs" with {}
    When bob sends "read the logs"
    Then alice's turn 1 fails with reason "denied"
    And the tool "logs" was never called

  @profile:shared @req:ADR0122-D10-07 @configures
  Scenario: A delegated asker is refused unless the host maps the delegation
    Given alice has started a shared conversation with alice's delegate
    When alice's delegate tries to send "do it for alice"
    Then the answer is 403 with error "delegation refused"

  @profile:shared @req:ADR0122-D10-10 @configures
  Scenario Outline: Only an exact true clears a viewer
    Given the clearance service answers <answer> for carol
    And alice has started a shared conversation with bob and carol
    And the model calls "logs" with {}
    When bob sends "read the logs"
    Then alice sees turn 1 answered "re: read the logs"
    And carol sees the reply to turn 1 as restricted

    Examples:
      | answer  |
      | "yes"   |
      | 1       |
      | "true"  |
      | {}      |

  @profile:shared @req:ADR0122-D10-11 @configures
  Scenario: The event stream filters per viewer, on replay and on resume
    Given alice has started a shared conversation with bob and carol
    And the model calls "logs" with {}
    When bob sends "read the logs"
    Then alice sees turn 1 answered "re: read the logs"
    When carol opens the event stream
    Then carol's stream shows the reply to turn 1 only as a restricted placeholder
    When carol reconnects from the first record
    Then carol's stream shows the reply to turn 1 only as a restricted placeholder

  @profile:shared @req:ADR0122-D10-11 @configures
  Scenario: A participant removed while their stream is open is delivered nothing written after, even before re-authorization
    Given alice has started a shared conversation with bob
    When alice sends "before"
    Then alice sees turn 1 answered "re: before"
    When bob opens the event stream
    And alice opens the event stream
    Then bob's stream delivers the reply of turn 1 with the text "re: before"
    When alice removes bob from the participants
    And alice sends "after the removal"
    Then alice's stream delivers the reply of turn 2 with the text "re: after the removal"
    And bob's stream got exactly these events:
      | event   | turn | role      | status   | text       |
      | status  |      |           |          |            |
      | message | 1    | user      | accepted | before     |
      | message | 1    | assistant | complete | re: before |

  @profile:shared @req:ADR0122-D10-12 @configures
  Scenario: A running turn's live text goes to its asker alone
    Given alice has started a shared conversation with bob
    And the model streams "secret " "figures" and waits
    When alice opens the event stream
    And bob opens the event stream
    And bob sends "show me the figures"
    And the model has streamed its first words
    Then bob's stream shows "secret figures"
    When the model is released
    Then alice sees turn 1 answered "secret figures"
    And bob's stream delivers the reply of turn 1 with the text "secret figures"
    When bob sends "that is all"
    Then alice's stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text                |
      | status  |      |           |          |                     |
      | message | 1    | user      | accepted | show me the figures |
      | message | 1    | assistant | complete | secret figures      |

  @profile:shared @req:ADR0122-D10-12 @configures
  Scenario: A participant who attaches while another's turn is running gets no partial of it
    Given alice has started a shared conversation with bob
    And the model streams "secret " "figures" and waits
    When bob sends "show me the figures"
    And the model has streamed its first words
    And alice opens the event stream
    And bob's other token opens the event stream
    Then bob's other token's stream shows a partial "secret figures" for turn 1
    When the model is released
    Then alice sees turn 1 answered "secret figures"
    When bob sends "that is all"
    Then alice's stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text                |
      | status  |      |           |          |                     |
      | message | 1    | user      | accepted | show me the figures |
      | message | 1    | assistant | complete | secret figures      |

  @profile:shared @req:ADR0122-D10-12 @configures
  Scenario Outline: A running turn's live text goes to no identity that differs from the asker's in one field alone
    Given alice has started a shared conversation with bob and <principal>
    And the model streams "secret " "figures" and waits
    When <principal> opens the event stream
    And bob opens the event stream
    And bob sends "show me the figures"
    And the model has streamed its first words
    Then bob's stream shows "secret figures"
    When the model is released
    Then bob's stream delivers the reply of turn 1 with the text "secret figures"
    When bob sends "that is all"
    Then <principal>'s stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text                |
      | status  |      |           |          |                     |
      | message | 1    | user      | accepted | show me the figures |
      | message | 1    | assistant | complete | secret figures      |

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-12 @configures
  Scenario: A running turn's live text goes to the asker's every token
    Given alice has started a shared conversation with bob
    And the model streams "secret " "figures" and waits
    When bob's other token opens the event stream
    And bob sends "show me the figures"
    And the model has streamed its first words
    Then bob's other token's stream shows "secret figures"
    When the model is released
    And bob sends "that is all"
    Then bob's other token's stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text                |
      | status  |      |           |          |                     |
      | message | 1    | user      | accepted | show me the figures |
      | delta   | 1    |           |          | "secret "           |
      | delta   | 1    |           |          | figures             |
      | message | 1    | assistant | complete | secret figures      |

  @profile:shared @req:ADR0122-D10-09 @configures
  Scenario Outline: The asker's own entries are shown to the asker's every token, and to no look-alike
    Given alice has started a shared conversation with bob and <principal>
    And the model calls "payroll" with {"team": "night shift"}
    And the model replies "Three night-shift engineers were on call."
    When bob sends "who was on call?"
    Then alice sees turn 1 answered "Three night-shift engineers were on call."
    And <principal> sees <view>

    Examples:
      | principal            | view                                                         |
      | bob's other token    | turn 1 answered "Three night-shift engineers were on call." |
      | bob at evil          | the reply to turn 1 as restricted                            |
      | bob without a tenant | the reply to turn 1 as restricted                            |
      | bob for carol        | the reply to turn 1 as restricted                            |

  @profile:shared @req:ADR0122-D10-09 @configures
  Scenario Outline: The host is asked about the viewer's whole identity
    Given alice has started a shared conversation with bob and <principal>
    And the model calls "logs" with {}
    When bob sends "read the logs"
    Then alice sees turn 1 answered "re: read the logs"
    When <principal> reads the whole history
    Then the clearance service was asked about <principal>'s whole identity

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-13 @configures
  Scenario Outline: A turn's context holds no restricted turn of an identity that differs from its asker's in one field alone
    Given the setting "shared.narrowed" is ["acme/bob~carol"]
    And alice has started a shared conversation with bob and <principal>
    And the model calls "payroll" with {"team": "night shift"}
    And the model replies "Three night-shift engineers were on call."
    When bob sends "who was on call?"
    Then alice sees turn 1 answered "Three night-shift engineers were on call."
    When <principal> sends "and now?"
    Then alice sees turn 2 answered "re: and now?"
    And request 3 to the model holds the messages:
      | role | content  |
      | user | and now? |

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-13 @configures
  Scenario: A turn's context holds its asker's own restricted turns, whichever token asked
    Given alice has started a shared conversation with bob
    And the model calls "payroll" with {"team": "night shift"}
    And the model replies "Three night-shift engineers were on call."
    When bob sends "who was on call?"
    Then alice sees turn 1 answered "Three night-shift engineers were on call."
    When bob's other token sends "and now?"
    Then alice sees turn 2 answered "re: and now?"
    And request 3 to the model holds the messages:
      | role      | content                                   |
      | user      | who was on call?                          |
      | assistant | Three night-shift engineers were on call. |
      | user      | and now?                                  |

  @profile:shared @req:ADR0122-D10-14 @configures
  Scenario: The rolling summary is built only from unrestricted turns
    Turn 1 leaves the window once turn 2 is answered; whatever the summarizer is handed for it is
    handed before the request to the model of the turn after it leaves (spec/prompt.md §3), so the
    fourth turn's answer is the sentinel for a summary built late.

    Given the setting "conversation.maxWindowTurns" is 1
    And alice has started a shared conversation with bob
    And the model calls "logs" with {}
    When bob sends "read the logs"
    Then alice sees turn 1 answered "re: read the logs"
    When bob sends "thanks"
    Then alice sees turn 2 answered "re: thanks"
    When bob sends "anything else?"
    Then alice sees turn 3 answered "re: anything else?"
    When bob sends "one more"
    Then alice sees turn 4 answered "re: one more"
    And the model has been asked 5 times
    And the summarizer was never handed the words "read the logs"

  @profile:shared @req:ADR0122-D10-16 @configures
  Scenario: An answer that drew on someone's memory is filtered like any other
    Given the agent has memory
    And bob's memory holds "pump 7 was patched by bob last week"
    And alice has started a shared conversation with bob and carol
    And the model replies "pump 7 was patched last week, by you"
    When bob sends "what do I know about pump 7?"
    Then alice sees turn 1 answered "pump 7 was patched last week, by you"
    And alice sees the reply to turn 1 classed "memory:acme/bob"
    And carol sees the reply to turn 1 as restricted

  @profile:shared @req:ADR0122-D10-16 @configures
  Scenario Outline: Memory is per asker: an identity that differs from bob's in one field alone draws on none of his
    Given the agent has memory
    And the setting "shared.narrowed" is ["acme/bob~carol"]
    And bob's memory holds "pump 7 was patched by bob last week"
    And alice has started a shared conversation with bob and <principal>
    When <principal> sends "what do I know about pump 7?"
    Then alice sees turn 1 answered "re: what do I know about pump 7?"
    And alice sees the reply to turn 1 with no class "memory:acme/bob"
    And no message of any request to the model holds "pump 7 was patched by bob last week"

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-16 @configures
  Scenario: Memory is per asker: another token of the asker draws on it
    Given the agent has memory
    And bob's memory holds "pump 7 was patched by bob last week"
    And alice has started a shared conversation with bob
    And the model replies "pump 7 was patched last week, by you"
    When bob's other token sends "what do I know about pump 7?"
    Then alice sees turn 1 answered "pump 7 was patched last week, by you"
    And alice sees the reply to turn 1 classed "memory:acme/bob"
    And some message of a request to the model holds "pump 7 was patched by bob last week"

  @profile:shared @req:ADR0122-D10-17 @configures
  Scenario: A participant's follow-up interrupts only their own running turn
    Given barge-in is on
    And alice has started a shared conversation with bob
    And the model calls "slow" with {}
    And the tool "slow" waits
    When bob sends "first question"
    And the tool "slow" has been called 1 time
    And alice sends "my own question"
    And the tool "slow" is released
    Then alice sees turn 1 answered "re: first question"
    And alice sees turn 2 answered "re: my own question"

  @profile:shared @req:ADR0122-D10-17 @configures
  Scenario Outline: A follow-up from an identity that differs from the asker's in one field alone does not interrupt
    Given barge-in is on
    And the setting "shared.narrowed" is ["acme/bob~carol"]
    And alice has started a shared conversation with bob and <principal>
    And the model calls "slow" with {}
    And the tool "slow" waits
    When bob sends "first question"
    And the tool "slow" has been called 1 time
    And <principal> sends "my own question"
    And the tool "slow" is released
    Then alice sees turn 1 answered "re: first question"
    And alice sees turn 2 answered "re: my own question"

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-17 @configures
  Scenario: A follow-up from another token of the asker interrupts their running turn
    Given barge-in is on
    And alice has started a shared conversation with bob
    And the model calls "slow" with {}
    And the tool "slow" waits
    When bob sends "first question"
    And the tool "slow" has been called 1 time
    And bob's other token sends "my follow-up"
    And the tool "slow" is released
    Then alice sees turn 1 interrupted
    And alice sees turn 2 answered "re: my follow-up"

  @profile:shared @req:ADR0122-D10-18 @configures
  Scenario: Each asker may have at most maxQueuedPerAsker turns waiting
    Given the setting "shared.maxQueuedPerAsker" is 2
    And alice has started a shared conversation with bob
    And the model waits before answering
    When bob sends "first"
    And the model has been asked 1 time
    And bob sends "second"
    And bob sends "third"
    And bob tries to send "fourth"
    Then the answer is 429 with error "too many requests"
    When alice sends "mine"
    Then the answer is 202

  @profile:shared @req:ADR0122-D10-18 @configures
  Scenario Outline: Exactly maxQueuedPerAsker turns of one asker wait, and the next is refused
    A configured 0 is the documented default, 8.

    Given the setting "shared.maxQueuedPerAsker" is <configured>
    And alice has started a shared conversation with bob
    And the model waits before answering
    When bob sends "first"
    And the model has been asked 1 time
    And bob sends <waiting> messages, each accepted
    And bob tries to send "one too many"
    Then the answer is 429 with error "too many requests"

    Examples:
      | configured | waiting |
      | 0          | 8       |
      | 3          | 3       |

  @profile:shared @req:ADR0122-D10-18 @configures
  Scenario Outline: The queue cap counts every token of an asker, and no look-alike's
    Given the setting "shared.maxQueuedPerAsker" is 1
    And the setting "shared.narrowed" is ["acme/bob~carol"]
    And alice has started a shared conversation with bob and <principal>
    And the model waits before answering
    When bob sends "first"
    And the model has been asked 1 time
    And bob sends "second"
    And <principal> tries to send "theirs"
    Then the answer is <answer>

    Examples:
      | principal            | answer                             |
      | bob's other token    | 429 with error "too many requests" |
      | bob at evil          | 202                                |
      | bob without a tenant | 202                                |
      | bob for carol        | 202                                |

  @profile:shared @req:ADR0122-D10-19 @configures
  Scenario: A participant removed while their turn waited is rejected when it is dequeued
    Given alice has started a shared conversation with bob
    And the model replies "done" after a release
    When alice sends "first"
    And the model has been asked 1 time
    And bob sends "second"
    And alice removes bob from the participants
    And the model is released
    Then alice sees turn 1 answered "done"
    And record 3 is rejected with reason "not-a-participant"

  @profile:shared @req:ADR0122-D10-19 @configures
  Scenario Outline: A removed asker's waiting turn is rejected, though an identity differing in one field alone remains
    Given alice has started a shared conversation with bob and <principal>
    And the model replies "done" after a release
    When alice sends "first"
    And the model has been asked 1 time
    And bob sends "second"
    And alice removes bob from the participants
    And the model is released
    Then alice sees turn 1 answered "done"
    And record 3 is rejected with reason "not-a-participant"

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-19 @configures
  Scenario Outline: Removing an identity that differs from a waiting asker's in one field alone leaves the asker's turn to be answered
    Given alice has started a shared conversation with bob and <principal>
    And the model replies "done" after a release
    When alice sends "first"
    And the model has been asked 1 time
    And bob sends "second"
    And alice removes <principal> from the participants
    And the model is released
    Then alice sees turn 1 answered "done"
    And alice sees turn 2 answered "re: second"

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-20 @configures
  Scenario: Replaying another participant's envelope under a new message id is refused
    Given alice has started a shared conversation with bob
    When bob sends "approve the shutdown"
    Then alice sees turn 1 answered "re: approve the shutdown"
    When the service captures the envelope of turn 1 from the log
    And the service puts the captured envelope into the conversation's inbox again
    And alice sends "status?"
    Then alice sees turn 2 answered "re: status?"
    And record 3 is rejected with reason "replayed"

  @profile:shared @req:ADR0122-D10-22 @configures
  Scenario: The same message id from two participants is two messages
    Given alice has started a shared conversation with bob
    When alice sends "alice's question" with message id "m-1"
    And bob sends "bob's question" with message id "m-1"
    Then alice sees turn 2 answered "re: bob's question"

  @profile:shared @req:ADR0122-D10-22 @configures
  Scenario Outline: The same message id from identities that differ in one field alone is two messages
    Given the setting "shared.narrowed" is ["acme/bob~carol"]
    And alice has started a shared conversation with bob and <principal>
    When bob sends "bob's question" with message id "m-1"
    And <principal> sends "the look-alike's question" with message id "m-1"
    Then alice sees turn 2 answered "re: the look-alike's question"

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-22 @configures
  Scenario: The same message id from another token of the same participant is one message
    Given alice has started a shared conversation with bob
    When bob sends "bob's question" with message id "m-1"
    And bob's other token sends "bob's question" again with message id "m-1"
    Then the second send was not delivered
    When bob sends "and then?"
    Then alice sees turn 2 answered "re: and then?"
    And the history has 4 records

  @profile:shared @req:ADR0122-D10-33 @configures
  Scenario Outline: Each participant has a maxInvalidRecords of their own: <bob> of bob's and <alice> of alice's empty messages
    Given the setting "conversation.maxInvalidRecords" is 2
    And alice has started a shared conversation with bob
    When bob sends <bob> blank messages
    And alice sends <alice> blank messages
    And alice sends "still there?"
    Then alice sees turn 1 answered "re: still there?"
    And the whole history is: <kept>, then turn 1 "still there?" answered

    Examples:
      | bob | alice | kept                      |
      | 2   | 1     | 3 rejected "malformed"    |
      | 3   | 2     | 4 rejected "malformed"    |
      | 3   | 3     | 4 rejected "malformed"    |

  @profile:shared @req:ADR0122-D10-15 @configures
  Scenario: A summary too big for one asker's slice is left out of that asker's turn only
    Given the settings are:
      | setting                                 | value |
      | conversation.budget.contextWindow       | 400   |
      | conversation.budget.reserveOutputTokens | 0     |
      | conversation.maxWindowTurns             | 1     |
    And the summarizer answers a summary of 400 characters
    And the summarizer then fails with status 503
    And alice has started a shared conversation with bob
    When alice sends "question one"
    Then alice sees turn 1 answered "re: question one"
    When alice sends "question two"
    Then alice sees turn 2 answered "re: question two"
    When alice sends "question three"
    Then alice sees turn 3 answered "re: question three"
    When bob sends a message of 1000 characters
    Then alice sees turn 4 answered "re: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    And request 4 to the model carries no summary
    When alice sends "and now?"
    Then alice sees turn 5 answered "re: and now?"
    And request 5 to the model carries that summary, fenced

  @profile:shared @req:ADR0122-D10-21 @configures
  Scenario: Approvals stay refused in shared mode too
    Given the tool "drop-table" needs approval
    Then the system refuses to start

  @profile:shared @req:ADR0122-D10-19 @crash @configures
  Scenario: Removing a participant does not rewrite their answered turns after a restart
    # Whether the asker was a participant is a recorded verdict: a replay serves it.
    Given alice has started a shared conversation with bob
    When bob sends "first"
    Then alice sees turn 1 answered "re: first"
    When alice removes bob from the participants
    And the system is killed and restarted
    And alice sends "second"
    Then alice sees turn 2 answered "re: second"
    And request 2 to the model holds the messages:
      | role      | content    |
      | user      | first      |
      | assistant | re: first  |
      | user      | second     |
