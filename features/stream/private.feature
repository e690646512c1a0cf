Feature: Private messages in a session: relayed untouched, never read
  As a person sending a message only the chat's people can read
  I want the system to carry it as it came and keep it out of every assistant's reach
  So that nothing but the people I write to ever reads it

  A private message carries enc (the algorithm's and the key's names, and the ciphertext) in
  place of text. The stream logs it as it came, once per message id, and no assistant is ever
  given it: it is never a turn and never part of the conversation's record.

  @profile:stream @req:ADR0052-P-01
  Scenario: A private message is logged with its enc exactly, once per message id, and never reaches the model
    Given alice has started a conversation
    And the model replies "hi" to "hello"
    When alice follows the session stream over WebSocket
    And alice sends the private message "p1" sealed as {"alg": "mls-1", "kid": "k7", "ct": "AAEC+/=="}
    Then the session answers 202 {"messageId": "p1", "state": "sent"}
    When alice sends the private message "p1" sealed as {"alg": "mls-1", "kid": "k7", "ct": "AAEC+/=="}
    Then the session answers 202 {"messageId": "p1", "state": "sent"}
    When alice sends the private message "p1" sealed as {"alg": "mls-1", "kid": "k8", "ct": "BBBB"}
    Then the session answers 202 {"messageId": "p1", "state": "sent"}
    And the model was asked for exactly, in order:
      | last user message |
    And the status says the conversation is "open" after 0 turns
    When alice steers "hello" as "m2"
    Then turn 1 is answered "hi"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                                                     |
      | 1   | user-message | p1      | {"message":"p1","state":"sent","enc":{"alg":"mls-1","kid":"k7","ct":"AAEC+/=="}} |
      | 2   | user-message | m2      | {"message":"m2","state":"sent","text":"hello"}                           |
      | 3   | text-delta   | a:1     | {"text":"hi"}                                                            |
      | 4   | text-done    | a:1     | {"status":"complete","text":"hi"}                                        |
    And the model was asked for exactly, in order:
      | last user message |
      | hello             |
    And request 1 to the model holds the messages:
      | role | content |
      | user | hello   |
    And the status says the conversation is "open" after 1 turn

  @profile:stream @req:ADR0052-P-01
  Scenario: A second private message id is its own message, logged after the first
    Given alice has started a conversation
    When alice follows the session stream over SSE
    And alice sends the private message "p1" sealed as {"alg": "mls-1", "kid": "k7", "ct": "AAEC"}
    And alice sends the private message "p2" sealed as {"alg": "mls-1", "kid": "k7", "ct": "AAED"}
    Then the session answers 202 {"messageId": "p2", "state": "sent"}
    When alice sends the private message "p1" sealed as {"alg": "mls-1", "kid": "k7", "ct": "AAEC"}
    Then the session answers 202 {"messageId": "p1", "state": "sent"}
    And alice's SSE reader's frames are exactly:
      | cur | type         | message | data                                                                 |
      | 1   | user-message | p1      | {"message":"p1","state":"sent","enc":{"alg":"mls-1","kid":"k7","ct":"AAEC"}} |
      | 2   | user-message | p2      | {"message":"p2","state":"sent","enc":{"alg":"mls-1","kid":"k7","ct":"AAED"}} |
    And the model was asked for exactly, in order:
      | last user message |
    And the status says the conversation is "open" after 0 turns

  @profile:stream @req:ADR0052-P-01 @crash
  Scenario: A private message id is remembered across a restart: the same id again logs nothing
    Given alice has started a conversation
    When alice follows the session stream over WebSocket
    And alice sends the private message "p1" sealed as {"alg": "mls-1", "kid": "k7", "ct": "AAEC"}
    Then the session answers 202 {"messageId": "p1", "state": "sent"}
    When alice's WebSocket reader reaches cursor 1
    And alice's WebSocket reader stops
    And the system is killed and restarted
    And alice sends the private message "p1" sealed as {"alg": "mls-1", "kid": "k7", "ct": "AAEC"}
    Then the session answers 202 {"messageId": "p1", "state": "sent"}
    When alice sends the private message "p2" sealed as {"alg": "mls-1", "kid": "k7", "ct": "AAED"}
    Then the session answers 202 {"messageId": "p2", "state": "sent"}
    When alice reads the session stream over WebSocket from 0
    Then alice's WebSocket reader's frames are exactly:
      | cur | type         | message | data                                                                 |
      | 1   | user-message | p1      | {"message":"p1","state":"sent","enc":{"alg":"mls-1","kid":"k7","ct":"AAEC"}} |
      | 2   | user-message | p2      | {"message":"p2","state":"sent","enc":{"alg":"mls-1","kid":"k7","ct":"AAED"}} |
    And the model was asked for exactly, in order:
      | last user message |
    And the status says the conversation is "open" after 0 turns

  @profile:stream @req:ADR0052-P-01
  Scenario Outline: A private message's body with <what> is refused naming <detail>, and nothing is logged
    Given alice has started a conversation
    When alice steers with the body <body>
    Then the session answers 400 {"error": "bad request", "detail": "<detail>"}
    When alice opens the session stream
    Then the open answer says head 0 and floor 1

    Examples:
      | what             | detail  | body                                                                                 |
      | text and enc     | text    | {"messageId": "p1", "text": "hi", "enc": {"alg": "mls-1", "kid": "k7", "ct": "AAEC"}} |
      | neither          | text    | {"messageId": "p1"}                                                                  |
      | no alg           | enc.alg | {"messageId": "p1", "enc": {"kid": "k7", "ct": "AAEC"}}                               |
      | no kid           | enc.kid | {"messageId": "p1", "enc": {"alg": "mls-1", "ct": "AAEC"}}                            |
      | no ct            | enc.ct  | {"messageId": "p1", "enc": {"alg": "mls-1", "kid": "k7"}}                             |
      | an empty kid     | enc.kid | {"messageId": "p1", "enc": {"alg": "mls-1", "kid": "", "ct": "AAEC"}}                 |
      | an empty ct      | enc.ct  | {"messageId": "p1", "enc": {"alg": "mls-1", "kid": "k7", "ct": ""}}                   |

  @profile:stream @req:ADR0052-P-02
  Scenario: A private message id is its sender's own: another person's message under it is logged too
    Given alice has started a shared conversation with bob
    When alice follows the session stream over WebSocket
    And bob sends the private message "pm-1" sealed as {"alg": "mls-1", "kid": "k7", "ct": "AAEC"}
    Then the session answers 202 {"messageId": "pm-1", "state": "sent"}
    When alice sends the private message "pm-1" sealed as {"alg": "mls-1", "kid": "k7", "ct": "AAED"}
    Then the session answers 202 {"messageId": "pm-1", "state": "sent"}
    When bob sends the private message "pm-1" sealed as {"alg": "mls-1", "kid": "k7", "ct": "AAEC"}
    Then the session answers 202 {"messageId": "pm-1", "state": "sent"}
    When alice sends the private message "pm-1" sealed as {"alg": "mls-1", "kid": "k7", "ct": "AAED"}
    Then the session answers 202 {"messageId": "pm-1", "state": "sent"}
    When alice opens the session stream
    Then the open answer says head 2 and floor 1
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | data                                                                           |
      | 1   | user-message | person:bob   | {"message": "pm-1", "state": "sent", "enc": {"alg": "mls-1", "kid": "k7", "ct": "AAEC"}} |
      | 2   | user-message | person:alice | {"message": "pm-1", "state": "sent", "enc": {"alg": "mls-1", "kid": "k7", "ct": "AAED"}} |
    And the model was asked for exactly, in order:
      | last user message |
