Feature: Every exchange speaks the documented contract
  As an implementer checking my system against the kit
  I want every request and answer held to spec/openapi.yaml and every event to its schema
  So that clients built against the specification work against any conforming system

  The kit validates every request it sends and every response it receives, in every scenario,
  against spec/openapi.yaml, and every server-sent event's data against its JSON Schema. This
  scenario walks each route once, errors included, so that all of them are checked at least once.

  # The walk opens its event stream right after asking for the close, so the close's record may be
  # committed between the stream's first read of the log and its watch: the stream must deliver it
  # all the same (spec/http.md, the backstop read), or the walk never sees the closed event.
  @profile:core @req:ADR0122-D6-01
  Scenario: Every route answers as the specification documents
    Given alice has started a conversation
    And alice has had 1 turn answered
    When alice walks every route of the conversation, errors included
    Then every exchange so far followed the contract

  @profile:core @req:ADR0122-D6-01 @configures
  Scenario: Every open stream of a conversation that closes ends right after its closed event
    However the system learns of the close, by notification or by polling its log.

    Given the setting "gateway.pollMs" is 1
    And alice has started a conversation "A"
    When alice opens 6 event streams of conversation "A"
    And alice closes the conversation
    Then each of alice's streams of conversation "A" ends right after a "closed" event

  @profile:core @req:ADR0122-D6-01
  Scenario Outline: A history page holds 1 to 500 records; a limit outside is refused
    Given alice has started a conversation
    And alice has had 1 turn answered
    When alice reads a page of the history with limit <limit>
    Then <answer>

    Examples:
      | limit | answer                                        |
      | 0     | the answer is 400 with error "bad request"    |
      | 1     | the page holds 1 record                       |
      | 2     | the page holds 2 records                      |
      | 500   | the page holds 2 records                      |
      | 501   | the answer is 400 with error "bad request"    |
