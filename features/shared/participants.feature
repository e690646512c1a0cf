Feature: A shared conversation: its participants, and turns run as their asker
  As the lead of an incident whose chat several responders share
  I want everyone in the room to ask the agent, each with their own authority
  So that sharing a conversation never widens what anyone can reach

  A shared conversation has explicit participants, managed by its owner, and an identity is a
  participant only when every field of it matches. Its coordinator runs as a host service
  principal; each turn runs as a separate execution owned by the participant who asked it, with
  their grants and their memory. Each asker's follow-ups, queue, message ids and count of invalid
  messages are their own, and removing a participant ends their stream and rejects their waiting
  turns.

  Background:
    Given the tools and their classes are:
      | tool    | class    |
      | logs    | incident |
      | payroll | hr       |
    And the clearances are:
      | viewer | classes                                    |
      | alice  | incident, hr, unclassified, memory:acme/bob |
      | bob    | incident                                   |

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
    And dave gets the same 404 as for a missing conversation on the conversation routes of it
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

  @profile:shared @req:ADR0122-D10-04 @crash @configures
  Scenario: A coordinator running under an end user, whatever owner it names, matches nobody
    While dave was the service principal, alice's coordinator was started under him; after a
    restart that names the host's own service principal, dave is an end user again.

    Given the setting "shared.servicePrincipal" is {"tenant": "acme", "actor": "dave"}
    And alice has started a shared conversation with bob
    And alice has had 1 turn answered
    When the system is killed and restarted with the setting "shared.servicePrincipal" at {"tenant": "acme", "actor": "loom-service"}
    Then alice gets the same 404 as for a missing conversation on every route
    And bob gets the same 404 as for a missing conversation on every route
    And dave gets the same 404 as for a missing conversation on the conversation routes of it
    And the service gets the same 404 as for a missing conversation on the conversation routes
    When alice starts a shared conversation with bob
    Then the answer is 201

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
