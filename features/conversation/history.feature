Feature: History reads are bounded and cursors are positions, not promises
  As a client paging through a long conversation
  I want every read to cost the same whatever I ask
  So that neither a long conversation nor a hostile cursor can make the server do unbounded work

  A read scans at most maxScan log events and always says where to go on. A cursor is
  "<generation>.<sequence>", a position inside this conversation's own log: malformed is an error,
  never "start over", and a position past the end is clamped to the end. What a log event is, is
  the system's own, but every record is one of its own (spec/http.md): a read within maxScan events
  holds at most maxScan records, and the pages together hold the whole history.

  @profile:core @req:ADR0122-D3-02 @configures
  Scenario: A read stops after maxScan events and still gives the next cursor
    # Four records cannot come in one read of at most 3 events, however the 30 tool rounds are
    # logged, so some page of 10 stops short.
    Given the setting "conversation.maxScan" is 3
    And the setting "conversation.maxIterations" is 50
    And alice has started a conversation
    And the model calls "lookup" 30 times in a row
    And the tool "lookup" answers {"found": true}
    When alice sends "look everything up"
    Then turn 1 is answered "re: look everything up"
    When alice sends "and now?"
    Then turn 2 is answered "re: and now?"
    When alice reads the history forward 10 at a time
    Then no page held more than 3 records
    And some page was short but not done
    And the pages together hold the records 1, 2, 3, 4

  @profile:core @req:ADR0122-D3-03
  Scenario: A page holds 50 records unless asked, and a limit runs from 1 to 500
    # 26 turns without tool calls take at most 26 x 52 log events, within the default maxScan of
    # 2000 (spec/http.md), so the scan bound never cuts these pages short.
    Given alice has started a conversation
    And alice has had 26 turns answered
    When alice reads the history with no limit
    Then the answer is a page of the records 1 to 50, not done
    When alice reads the history with limit 51
    Then the answer is a page of the records 1 to 51, not done
    When alice reads the history with limit 1
    Then the answer is a page of the records 1 to 1, not done
    When alice reads the history with limit 500
    Then the answer is a page of the records 1 to 52, done
    When alice reads the history with limit 501
    Then the answer is 400 with error "bad request"
    When alice reads the history with limit 0
    Then the answer is 400 with error "bad request"

  @profile:core @req:ADR0122-D3-02 @configures
  Scenario: A read scanning backward stops after maxScan events too
    Given the setting "conversation.maxScan" is 3
    And the setting "conversation.maxIterations" is 50
    And alice has started a conversation
    And the model calls "lookup" 30 times in a row
    And the tool "lookup" answers {"found": true}
    When alice sends "look everything up"
    Then turn 1 is answered "re: look everything up"
    When alice sends "and now?"
    Then turn 2 is answered "re: and now?"
    When alice reads the history backward 10 at a time
    Then no page held more than 3 records
    And some page was short but not done
    And the pages together hold the records 4, 3, 2, 1

  @profile:core @req:ADR0122-D3-02 @configures
  Scenario Outline: Every read makes progress, even at the smallest maxScan (<direction>)
    # How many pages it takes, and which of them are empty, depends on the log's layout, which
    # is the system's own; that no page holds more than maxScan records does not.
    Given the setting "conversation.maxScan" is <maxScan>
    And alice has started a conversation
    And alice has had 2 turns answered
    When alice reads the history <direction> 10 at a time
    Then no page held more than <maxScan> records
    And some page was short but not done
    And the pages together hold the records <records>

    Examples:
      | maxScan | direction | records    |
      | 1       | forward   | 1, 2, 3, 4 |
      | 2       | backward  | 4, 3, 2, 1 |
      | 1       | backward  | 4, 3, 2, 1 |
      | 3       | forward   | 1, 2, 3, 4 |

  @profile:core @req:ADR0122-D3-04
  Scenario Outline: A malformed cursor is refused, never read as the start
    Given alice has started a conversation
    And alice has had 1 turn answered
    When alice reads the history from cursor "<cursor>"
    Then the answer is 400 with error "invalid cursor"

    Examples:
      | cursor                |
      | abc                   |
      | 7                     |
      | 1.                    |
      | .1                    |
      | -1.0                  |
      | 1.2.3                 |
      | 9999999999999999999.0 |
      | 0.9999999999999999999 |

  @profile:core @req:ADR0122-D3-05
  Scenario: A cursor past the end is clamped and answered at once
    Given alice has started a conversation
    And alice has had 2 turns answered
    When alice reads the history forward from cursor "999999999.0"
    Then the answer is a done page with no records
    When alice reads the history backward from cursor "999999999.0"
    Then the answer is a page holding the records 4,3,2,1
    When alice reads the history backward from cursor "0.999999999"
    Then the answer is a page holding the records 4,3,2,1
    When alice reads the history forward from cursor "999999999999999999.999999999999999999"
    Then the answer is a done page with no records
    When alice reads the history backward from cursor "999999999999999999.999999999999999999"
    Then the answer is a page holding the records 4,3,2,1

  @profile:core @req:ADR0122-D3-06
  Scenario: A cursor taken from another conversation reads nothing of it
    Given alice has started a conversation "A"
    And alice has had 2 turns answered
    And alice has started a conversation "B"
    And alice has had 1 turn answered
    When alice takes the last cursor of conversation "B"
    And alice reads conversation "A" forward from that cursor
    Then every record read belongs to conversation "A"
