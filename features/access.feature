Feature: Only the owner may touch a conversation
  As the person who started a conversation
  I want nobody else to read it, drive it or learn that it exists
  So that an agent running with my authority answers only me

  A conversation belongs to the identity that started it: tenant, actor and on-behalf-of, all
  three. Every refusal looks exactly like a conversation that does not exist.

  @profile:core @req:ADR0122-D8-01
  Scenario: A stranger gets the same 404 as for a conversation that does not exist
    Given alice has started a conversation
    And alice has had 1 turn answered
    Then mallory gets the same 404 as for a missing conversation on every route
    And bob gets the same 404 as for a missing conversation on every route

  @profile:core @req:ADR0122-D8-02
  Scenario: A delegate acting on behalf of the owner is not the owner
    Given alice has started a conversation
    Then alice's delegate gets the same 404 as for a missing conversation on every route

  @profile:core @req:ADR0122-D8-03
  Scenario: A principal without an actor is not authenticated
    When nobody starts a conversation with id "orphan"
    Then the answer is 401 with error "unauthenticated"
