Feature: The connection edge frees every connection a client stops using and caps how many are open
  As an operator exposing conversations to the internet
  I want every request to arrive within a deadline and the open connections capped
  So that clients that send a little and stall cannot hold the server's connections for ever

  A request's headers must arrive within headersTimeout and the whole request within
  requestTimeout; an event stream, which has no body, is exempt once its headers are in. A
  connection over maxConnections is closed at once, unanswered; event streams and idle keep-alive
  connections count. The kit sets small limits.

  @profile:gateway @req:ADR0122-D6-20 @configures
  Scenario: A request whose body stalls is answered 408 at the request deadline and its connection closed
    Given the setting "gateway.requestTimeoutMs" is 300
    And alice has started a conversation
    When alice sends the headers of a turn and half its body, then stalls
    Then the stalled request is answered 408 with error "request timeout", no sooner than the request deadline
    And the stalled connection is closed within 2 seconds of the request deadline
    And the history has 0 records

  @profile:gateway @req:ADR0122-D6-20 @configures
  Scenario: A request refused before its body is read is answered at once and its stalled connection closed by the deadline
    Given the setting "gateway.requestTimeoutMs" is 1500
    And alice has started a conversation
    When someone without credentials sends the headers of a turn and half its body, then stalls
    Then the stalled request is answered 401 with error "unauthenticated", before the request deadline
    And the stalled connection is closed within 2 seconds of the request deadline

  @profile:gateway @req:ADR0122-D6-20 @configures
  Scenario: A body that arrives in pieces within the request deadline is served
    Given the setting "gateway.requestTimeoutMs" is 1500
    And alice has started a conversation
    When alice sends "slow but in time" in two halves, 300 ms apart
    Then the answer is 202
    And turn 1 is answered "re: slow but in time"

  @profile:gateway @req:ADR0122-D6-20 @configures
  Scenario: An event stream outlives the request deadline
    Given the setting "gateway.requestTimeoutMs" is 300
    And alice has started a conversation
    And alice opens the event stream
    When twice the request deadline passes
    And alice sends "still there?"
    Then alice's stream delivers the reply of turn 1 with the text "re: still there?"

  @profile:gateway @req:ADR0122-D6-21 @configures
  Scenario: A client that stalls in its headers has its connection closed at the header deadline
    Given the setting "gateway.headersTimeoutMs" is 300
    When a client sends part of a request's headers and stalls
    Then the stalled connection is closed, unanswered or answered 408, no sooner than the header deadline and within 2 seconds of it

  @profile:gateway @req:ADR0122-D6-22 @configures
  Scenario Outline: A connection over the cap is refused at once, and a freed slot serves again
    An event stream holds one of the slots; the client holds the others.

    Given the setting "gateway.maxConnections" is <cap>
    And alice has started a conversation
    And alice opens the event stream
    When a client holds <others> more connections, each answered
    Then one more connection is refused at once
    When alice closes her stream
    Then a new connection is answered and held
    And one more connection is refused at once

    Examples:
      | cap | others |
      | 2   | 1      |
      | 4   | 3      |

  @profile:gateway @req:ADR0122-D6-23
  Scenario Outline: A client that goes away mid-request is no internal error
    The client goes away while the system is still asking the identity service who it is; the
    500 that follows for bob, whose lookup fails, is the only report the error hook may get before
    the end marker, a second 500 for bob: a system delivers its reports in the order it made them,
    so once the end marker's report is in, any report of the client gone is in too.

    Given alice has started a conversation
    And the identity service holds its answer for alice's token
    When alice <does> and goes away while the identity service is asked
    And the identity service fails for bob's token, saying "directory unreachable"
    And bob starts a conversation with id "anything"
    Then the answer is a 500 with an error id and nothing else
    And the error hook got that error id and no other report

    Examples:
      | does                    |
      | reads the status        |
      | reads the history       |
      | opens the event stream  |
      | reads the participants  |
      | closes the conversation |
