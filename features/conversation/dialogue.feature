Feature: A conversation is one durable dialogue
  As a person talking to an agent
  I want every message I send recorded and answered exactly once
  So that the transcript is a faithful record I can page through

  The conversation is one durable execution: each user turn is taken from its inbox, answered by
  the model, and both the turn and the reply are recorded once, in order, readable back as history.
  The server mints a conversation's id; taking an id the caller chose is an extension a system
  claims in discovery ("chosen-id"), and the scenarios that need one are not applicable without it.

  @profile:core @req:ADR0122-D1-01
  Scenario: A streamed reply is recorded and readable in history
    Given alice has started a conversation
    And the model streams "Hello" ", " "alice!"
    When alice sends "hi there"
    Then turn 1 is answered "Hello, alice!"
    And the history holds:
      | ord | turn | role      | status   | text          |
      | 1   | 1    | user      | accepted | hi there      |
      | 2   | 1    | assistant | complete | Hello, alice! |
    And the model has been asked 1 time in all
    And request 1 to the model holds the messages:
      | role | content  |
      | user | hi there |

  @profile:core @req:ADR0122-D1-09
  Scenario Outline: A model's answer sent with <form> is read like any other
    Real providers send more than one data line per event: keep-alive comments, JSON spread over
    several data lines, a last chunk that only reports usage, or a plain JSON answer from a server
    that ignores "stream". A system reads them all as the same reply.

    Given alice has started a conversation
    And the model streams "Hello" ", " "\"alice\"," " how are you?" with <form>
    When alice sends "hi there"
    Then turn 1 is answered "Hello, \"alice\", how are you?"
    And the history holds:
      | ord | turn | role      | status   | text                         |
      | 1   | 1    | user      | accepted | hi there                     |
      | 2   | 1    | assistant | complete | Hello, "alice", how are you? |
    And the model has been asked 1 time in all

    Examples:
      | form                                         |
      | a keep-alive comment before every event      |
      | every event's data spread over several lines |
      | a usage-only chunk before the end            |
      | a plain JSON answer instead of a stream      |
      | every stream form at once                    |

  @profile:core @req:ADR0122-D1-01 @req:ADR0122-D3-03
  Scenario: History pages forward and backward with cursors
    Given alice has started a conversation
    And alice has had 3 turns answered
    When alice reads the history forward 2 at a time
    Then the pages hold the records 1,2 | 3,4 | 5,6
    When alice reads the history backward 4 at a time
    Then the pages hold the records 6,5,4,3 | 2,1

  @profile:core @req:ADR0122-D1-31
  Scenario Outline: A message id of 1 to 128 printable ASCII characters is taken (<what>)
    Given alice has started a conversation
    When alice sends "check pump 3" under a message id of "<unit>" <n> times and then "<tail>"
    Then the answer is 202
    And turn 1 is answered "re: check pump 3"

    Examples:
      | what                         | unit | n   | tail |
      | one character                | x    | 1   |      |
      | 128 characters               | x    | 128 |      |
      | the first and last printable | \u0020 | 1  | ~    |

  @profile:core @req:ADR0122-D1-31
  Scenario Outline: Any other message id is a bad request and records nothing (<what>)
    Given alice has started a conversation
    When alice sends "check pump 3" under a message id of "<unit>" <n> times and then "<tail>"
    Then the answer is 400 with error "bad request"
    When alice sends "thanks"
    Then turn 1 is answered "re: thanks"
    And the whole history is: turn 1 "thanks" answered

    Examples:
      | what                                                 | unit | n   | tail    |
      | 129 characters                                       | x    | 129 |         |
      | 128 characters, one of two bytes                     | x    | 127 | é       |
      | 127 characters in 128 UTF-16 units, one an emoji     | x    | 126 | 😀      |
      | 128 bytes, one a control character                   | x    | 127 | \u007f  |
      | a tab                                                | x    | 3   | \t      |
      | one three-byte character                             | 中   | 1   |         |

  @profile:core @req:ADR0122-D1-02
  Scenario: A turn retried with the same message id is answered once
    Given alice has started a conversation
    When alice sends "what is the status?" with message id "m-42"
    And alice sends "what is the status?" again with message id "m-42"
    Then the second send was not delivered
    And turn 1 is answered "re: what is the status?"
    When alice sends "thanks"
    Then turn 2 is answered "re: thanks"
    And the history holds:
      | ord | turn | role      | status   | text                    |
      | 1   | 1    | user      | accepted | what is the status?     |
      | 2   | 1    | assistant | complete | re: what is the status? |
      | 3   | 2    | user      | accepted | thanks                  |
      | 4   | 2    | assistant | complete | re: thanks              |
    And the model has been asked 2 times in all
    And request 2 to the model holds the messages:
      | role      | content                 |
      | user      | what is the status?     |
      | assistant | re: what is the status? |
      | user      | thanks                  |

  @profile:core @req:ADR0122-D1-01
  Scenario: The server mints a distinct, well-formed id for every conversation started without one
    Given alice has started a conversation "A"
    And alice has started a conversation "B"
    Then conversations "A" and "B" have distinct ids the status repeats

  @profile:core @req:ADR0122-D1-04
  Scenario Outline: A caller-chosen conversation id must be well formed
    Given the system takes caller-chosen conversation ids
    When alice starts a conversation with id "<id>"
    Then the answer is <status>

    Examples:
      | id            | status                   |
      | incident-42   | 201                      |
      | a.b_c-9       | 201                      |
      | -leading-dash | 400 with error "invalid id" |
      | has~tilde     | 400 with error "invalid id" |
      | has::colons   | 400 with error "invalid id" |
      | Z9            | 201                      |
      | AZaz09        | 201                      |
      | has@at        | 400 with error "invalid id" |
      | has{brace     | 400 with error "invalid id" |
      | has/slash     | 400 with error "invalid id" |
      | cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc | 201 |
      | ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc | 400 with error "invalid id" |
      | _underscore   | 400 with error "invalid id" |
      | .dot          | 400 with error "invalid id" |
      | has^caret     | 400 with error "invalid id" |
      | has[bracket   | 400 with error "invalid id" |
      | has`backquote | 400 with error "invalid id" |
      | ends-badly~   | 400 with error "invalid id" |
      | ends-badly:   | 400 with error "invalid id" |
      | endsé         | 400 with error "invalid id" |
      | ends😀        | 400 with error "invalid id" |

  @profile:core @req:ADR0122-D1-05
  Scenario: A chosen id starts once for its owner
    Given the system takes caller-chosen conversation ids
    And alice has started a conversation with id "ops-room"
    And alice has had 1 turn answered
    When alice starts a conversation with id "ops-room"
    Then the answer is 200
    And the history has 2 records
    When alice's other token starts a conversation with id "ops-room"
    Then the answer is 200
    And the history has 2 records
    And alice's other token is answered on every route exactly as alice is

  @profile:core @req:ADR0122-D1-05 @req:ADR0122-D8-31
  Scenario Outline: A chosen id someone else took tells a stranger nothing
    A chosen id names a conversation within its owner's own ids: anyone else who chooses it gets
    exactly what an id nobody took gives them, a conversation of their own, and no access to
    the first one.

    Given the system takes caller-chosen conversation ids
    And alice has started a conversation with id "<room>"
    And alice has had 1 turn answered
    When <principal> starts a conversation with id "<room>"
    Then the answer is exactly what a free id gives <principal>
    When alice starts a conversation with id "<room>"
    Then the answer is 200
    And the history has 2 records
    And <principal> gets the same 404 as for a missing conversation on every route

    Examples: only <differs> differs from alice's identity
      | principal              | room   | differs                      |
      | mallory                | room-1 | everything                   |
      | bob                    | room-2 | the actor, in alice's tenant |
      | alice at evil          | room-3 | the tenant                   |
      | alice without a tenant | room-4 | the tenant, absent           |
      | alice for bob          | room-5 | onBehalfOf                   |

  @profile:core @req:ADR0122-D1-06
  Scenario: Closing records the close and ends the conversation
    Given alice has started a conversation
    And alice has had 1 turn answered
    When alice closes the conversation
    Then the history ends with a "closed" record
    And the status says the conversation is "closed" after 1 turn
    And alice sees the history:
      | turn | role      | status   | text           |
      | 1    | user      | accepted | question 1     |
      | 1    | assistant | complete | re: question 1 |
      | 0    | system    | closed   | -              |
    When alice tries to send "anyone there?"
    Then the answer is 409 with error "conflict"
    And the model has been asked 1 time in all
