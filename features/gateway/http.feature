Feature: The HTTP gateway fails closed and says nothing a caller was not entitled to
  As an operator exposing conversations to browsers
  I want every request authenticated, authorized before it can learn anything, and bounded
  So that a stranger learns nothing, a hostile page can do nothing and no client can exhaust the server

  The order of checks is fixed: Host and Origin, then authentication from connection facts, then
  authorization (the one 404), then limits (429), then the body. Every limit is a number the
  configuration sets; the kit sets small ones.

  @profile:gateway @req:ADR0122-D6-02 @configures
  Scenario: A server without authentication refuses to start unless explicitly insecure
    Given the system has no way to authenticate anyone
    Then the system refuses to start

  @profile:gateway @req:ADR0122-D6-02 @configures
  Scenario: An explicitly insecure server answers only loopback host names
    Given the system runs without authentication, explicitly
    When someone asks for the discovery document with the Host "localhost:8080"
    Then the answer is 200
    When someone starts a conversation with the Host "attacker.example"
    Then the answer is 403 with error "forbidden host"
    When someone starts a conversation with the Host "127.0.0.1"
    Then the answer is 201

  @profile:gateway @req:ADR0122-D6-02
  Scenario Outline: Credentials come only from the Authorization header
    When alice starts a conversation presenting <credential>
    Then the answer is 401 with error "unauthenticated"

    Examples:
      | credential                    |
      | no credential                 |
      | an unknown bearer token       |
      | her token as a query parameter |
      | her token in a session cookie  |

  @profile:gateway @req:ADR0122-D6-40
  Scenario Outline: The bearer scheme is read in any case (<scheme>)
    When alice starts a conversation presenting her token under the scheme "<scheme>"
    Then the answer is <status>

    Examples:
      | scheme | status                           |
      | Bearer | 201                              |
      | bearer | 201                              |
      | BEARER | 201                              |
      | bEaReR | 201                              |
      | Basic  | 401 with error "unauthenticated" |

  @profile:gateway @req:ADR0122-D6-03 @configures
  Scenario Outline: A stranger probing a busy conversation gets the 404, never a 429
    Given the setting "gateway.maxStreams" is 1
    And the setting "gateway.postsPerMinute" is 1
    And alice has started a conversation
    And alice opens the event stream
    When <stranger> opens the event stream of alice's conversation
    Then the answer is 404 with error "not found"
    When <stranger> sends "let me in" to alice's conversation twice
    Then both answers are 404 with error "not found"

    Examples:
      | stranger               |
      | mallory                |
      | alice at evil          |
      | alice without a tenant |
      | alice for bob          |

  @profile:gateway @req:ADR0122-D6-04 @configures
  Scenario: A request from an origin that is not allowed is refused before anything runs
    Given the setting "gateway.allowedOrigins" is ["https://app.example"]
    And alice has started a conversation
    When alice sends "transfer the funds" from the origin "https://evil.example"
    Then the answer is 403 with error "forbidden origin"
    And the answer carries no CORS headers
    When alice sends "hello" from the origin "https://app.example"
    Then the answer is 202
    And the answer allows the origin "https://app.example" without credentials
    And turn 1 is answered "re: hello"
    And the history has 2 records

  @profile:gateway @req:ADR0122-D6-41 @configures
  Scenario: An Origin named in the Connection header is judged all the same
    The Connection header names what belongs to the client's own connection; it cannot take a
    header the gateway judges out of its judgement, on whichever node of the system the request
    arrives.

    Given the setting "gateway.allowedOrigins" is ["https://app.example"]
    And alice has started a conversation
    When alice sends "transfer the funds" from the origin "https://evil.example" 3 times, naming Origin in the Connection header
    Then every answer is 403 with error "forbidden origin"
    And the history has 0 records

  @profile:gateway @req:ADR0122-D6-41
  Scenario Outline: A client's Loom-Forwarded-By is ignored
    Nodes mark the requests they forward to each other; a client that sends the mark itself, naming
    a node or not, is answered as any other request, by whichever node it reaches.

    When alice starts a conversation 3 times with "Loom-Forwarded-By: <by>"
    Then every answer is 201

    Examples:
      | by              |
      | node-1          |
      | node-2          |
      | node-2 00ff00ff |
      | someone         |

  @profile:gateway @req:ADR0122-D6-04 @configures
  Scenario Outline: An origin that only looks like an allowed one is refused before anything runs
    An origin is allowed only when it equals an entry of allowedOrigins exactly: the same scheme,
    the same host, the same port, character for character.

    Given the setting "gateway.allowedOrigins" is ["https://app.example"]
    And alice has started a conversation
    When alice sends "transfer the funds" from the origin "<origin>"
    Then the answer is 403 with error "forbidden origin"
    And the answer carries no CORS headers
    And the history has 0 records

    Examples: <look-alike>
      | origin                           | look-alike                           |
      | https://app.example.evil.example | the allowed origin as a prefix       |
      | https://evilapp.example          | the allowed host as a suffix         |
      | http://app.example               | another scheme                       |
      | https://app.example:8443         | another port                         |
      | https://APP.example              | another case                         |
      | https://app.example.             | a trailing dot                       |
      | null                             | the opaque origin of a sandboxed page |

  @profile:gateway @req:ADR0122-D6-04 @configures
  Scenario: A preflight from a look-alike origin gets no CORS headers
    Given the setting "gateway.allowedOrigins" is ["https://app.example"]
    And alice has started a conversation
    When someone asks for a preflight of the turns route from the origin "https://app.example.evil.example"
    Then the answer is 403 with error "forbidden origin"
    And the answer carries no CORS headers
    When someone asks for a preflight of the turns route from the origin "https://app.example"
    Then the answer allows the origin "https://app.example" without credentials

  @profile:gateway @req:ADR0122-D6-04 @configures
  Scenario: CORS headers ride error responses too, and credentials only when configured
    Given the setting "gateway.allowedOrigins" is ["https://app.example"]
    And the setting "gateway.allowCredentials" is true
    When mallory reads the status of a conversation that does not exist from the origin "https://app.example"
    Then the answer is 404 with error "not found"
    And the answer allows the origin "https://app.example" with credentials

  @profile:gateway @req:ADR0122-D6-04 @configures
  Scenario: A page on another host cannot reach a server through DNS rebinding
    Given the setting "gateway.allowedHosts" is ["loom.internal"]
    When alice starts a conversation with the Host "loom.internal"
    Then the answer is 201
    When alice starts a conversation with the Host "rebound.attacker.example"
    Then the answer is 403 with error "forbidden host"

  @profile:gateway @req:ADR0122-D6-04 @configures
  Scenario Outline: A Host that only looks like an allowed one is refused
    Given the setting "gateway.allowedHosts" is ["loom.internal"]
    When alice starts a conversation with the Host "<host>"
    Then the answer is 403 with error "forbidden host"

    Examples: <look-alike>
      | host                           | look-alike                 |
      | loom.internal.attacker.example | the allowed host as prefix |
      | evil-loom.internal             | the allowed host as suffix |
      | attacker.example               | another host altogether    |

  @profile:gateway @req:ADR0122-D6-04 @configures
  Scenario Outline: A Host naming an allowed host name is answered, whatever its port or case
    Given the setting "gateway.allowedHosts" is ["loom.internal"]
    When alice starts a conversation with the Host "<host>"
    Then the answer is 201

    Examples:
      | host               |
      | loom.internal:8443 |
      | LOOM.Internal      |

  @profile:gateway @req:ADR0122-D6-04
  Scenario: A POST that is not JSON is refused, so a cross-site form cannot be a request
    Given alice has started a conversation
    When alice sends "text=transfer" as "application/x-www-form-urlencoded"
    Then the answer is 415 with error "unsupported media type"
    When alice sends "transfer" as "text/plain"
    Then the answer is 415 with error "unsupported media type"

  @profile:gateway @req:ADR0122-D6-05
  Scenario: A user's words cannot forge a server-sent event
    Given alice has started a conversation
    And the model replies "ok"
    When alice sends "hi\nevent: error\ndata: {\"error\":\"forged\"}\r\n\r\ndata: x"
    Then turn 1 is answered "ok"
    And alice's stream replays the turn as exactly two message events and no "error" event
    And the first message event carries the text exactly as alice sent it

  @profile:gateway @req:ADR0122-D6-06 @configures
  Scenario: Concurrent streams are limited in total and per principal
    Given the setting "gateway.maxStreams" is 2
    And the setting "gateway.maxStreamsPerPrincipal" is 1
    And alice has started a conversation "A"
    And bob has started a conversation "B"
    And carol has started a conversation "C"
    When alice opens the event stream of conversation "A"
    And alice tries to open another event stream of conversation "A"
    Then the stream is refused with 429
    When bob opens the event stream of conversation "B"
    And carol tries to open the event stream of conversation "C"
    Then the stream is refused with 429

  @profile:gateway @req:ADR0122-D6-06 @configures
  Scenario: Live subscribers per conversation are limited
    Given the setting "gateway.maxSubscribers" is 1
    And alice has started a conversation "A"
    When alice opens the event stream of conversation "A"
    And alice tries to open another event stream of conversation "A"
    Then the stream is refused with 429

  @profile:gateway @req:ADR0122-D6-10 @configures
  Scenario: Refused streams do not hold on to a slot
    Given the setting "gateway.maxStreams" is 1
    And alice has started a conversation
    When mallory opens the event stream of alice's conversation
    And mallory opens the event stream of alice's conversation
    And alice opens the event stream
    Then alice's stream has delivered 0 messages

  @profile:gateway @req:ADR0122-D6-06
  Scenario: A body over 64 KiB is refused with 413 before the connection drops
    Given alice has started a conversation
    When alice sends a body of 70 KiB
    Then the answer is 413 with error "payload too large"

  @profile:gateway @req:ADR0122-D6-06
  Scenario Outline: A body of exactly 64 KiB is taken and one byte more is refused, by default
    Given alice has started a conversation
    When alice sends a turn in a body of exactly 65536 bytes, <length> Content-Length
    Then the answer is 202
    When alice sends a turn in a body of exactly 65537 bytes, <length> Content-Length
    Then the answer is 413 with error "payload too large"
    And turn 1 is answered "re: sized"
    And the history has 2 records

    Examples:
      | length    |
      | with its  |
      | without a |

  @profile:gateway @req:ADR0122-D6-06 @configures
  Scenario Outline: A body of exactly maxBodyBytes is taken and one byte more is refused
    Given the setting "gateway.maxBodyBytes" is 256
    And alice has started a conversation
    When alice sends a turn in a body of exactly 256 bytes, <length> Content-Length
    Then the answer is 202
    When alice sends a turn in a body of exactly 257 bytes, <length> Content-Length
    Then the answer is 413 with error "payload too large"
    And turn 1 is answered "re: sized"
    And the history has 2 records

    Examples:
      | length    |
      | with its  |
      | without a |

  @profile:gateway @req:ADR0122-D6-06 @configures
  Scenario Outline: Exactly maxStreams streams are open at once, and the next is refused
    Given the setting "gateway.maxStreams" is <limit>
    And the setting "gateway.maxStreamsPerPrincipal" is 10
    And alice has started a conversation "A"
    When alice opens <limit> event streams of conversation "A"
    And alice tries to open another event stream of conversation "A"
    Then the stream is refused with 429

    Examples:
      | limit |
      | 1     |
      | 3     |

  @profile:gateway @req:ADR0122-D6-06 @configures
  Scenario Outline: Exactly maxStreamsPerPrincipal streams are open per principal, and others still get theirs
    Given the setting "gateway.maxStreamsPerPrincipal" is <limit>
    And alice has started a conversation "A"
    And bob has started a conversation "B"
    When alice opens <limit> event streams of conversation "A"
    And alice tries to open another event stream of conversation "A"
    Then the stream is refused with 429
    When bob opens the event stream of conversation "B"

    Examples:
      | limit |
      | 1     |
      | 3     |

  @profile:gateway @req:ADR0122-D6-06 @req:ADR0122-D6-10 @configures
  Scenario: A closed stream gives its slot back, and only its own
    Given the setting "gateway.maxStreamsPerPrincipal" is 2
    And alice has started a conversation "A"
    When alice opens 2 event streams of conversation "A"
    And alice closes her 1st stream of conversation "A"
    And alice opens the event stream of conversation "A" again, once the closed stream's slot is back
    And alice tries to open another event stream of conversation "A"
    Then the stream is refused with 429

  @profile:gateway @req:ADR0122-D6-06 @configures
  Scenario Outline: The per-principal stream limit counts every token of a principal, and nobody else's
    Given the setting "gateway.maxStreamsPerPrincipal" is 1
    And alice has started a conversation "A"
    And <principal> has started a conversation "P"
    When alice opens the event stream of conversation "A"
    And <principal> tries to open the event stream of conversation "P"
    Then the answer is <answer>

    Examples:
      | principal              | answer                              |
      | alice's other token    | 429 with error "too many requests"  |
      | alice at evil          | 200                                 |
      | alice without a tenant | 200                                 |
      | alice for bob          | 200                                 |

  @profile:gateway @req:ADR0122-D6-06 @configures
  Scenario Outline: Exactly maxSubscribers live subscribers per conversation, and other conversations still get theirs
    Given the setting "gateway.maxSubscribers" is <limit>
    And alice has started a conversation "A"
    And alice has started a conversation "B"
    When alice opens <limit> event streams of conversation "A"
    And alice tries to open another event stream of conversation "A"
    Then the stream is refused with 429
    When alice opens the event stream of conversation "B"

    Examples:
      | limit |
      | 1     |
      | 3     |

  @profile:gateway @req:ADR0122-D6-06 @configures
  Scenario Outline: Exactly postsPerMinute POSTs are taken in a minute, and the next is refused
    Starting the conversation is the first POST.

    Given the setting "gateway.postsPerMinute" is <limit>
    And alice has started a conversation
    When alice sends <more> messages, each accepted
    And alice tries to send "one too many"
    Then the answer is 429 with error "too many requests"
    And the answer says when to retry

    Examples:
      | limit | more |
      | 2     | 1    |
      | 5     | 4    |

  @profile:gateway @req:ADR0122-D6-06 @configures
  Scenario Outline: The POST rate counts every token of a principal, and nobody else's
    Given the setting "gateway.postsPerMinute" is 2
    And alice has started a conversation
    And alice sends "one"
    When <principal> starts a conversation with id "theirs"
    Then the answer is <answer>

    Examples:
      | principal              | answer                             |
      | alice's other token    | 429 with error "too many requests" |
      | alice at evil          | 201                                |
      | alice without a tenant | 201                                |
      | alice for bob          | 201                                |

  @profile:gateway @req:ADR0122-D6-06 @configures
  Scenario: A stream lives only so long, then asks the client to reconnect
    Given the setting "gateway.streamLifetimeMs" is 300
    And alice has started a conversation
    When alice opens the event stream
    Then alice's stream ends with a "reconnect" event saying "lifetime", no sooner than its lifetime

  @profile:gateway @req:ADR0122-D6-06 @configures
  Scenario: POSTs are rate limited per principal
    Given the setting "gateway.postsPerMinute" is 3
    And alice has started a conversation
    When alice sends "one"
    And alice sends "two"
    And alice tries to send "three"
    Then the answer is 429 with error "too many requests"
    And the answer says when to retry

  @profile:gateway @req:ADR0122-D6-12 @configures
  Scenario: A slow reader's live text is coalesced or it is cut off, and the log loses nothing
    Given the setting "gateway.maxPendingBytes" is 8192
    And alice has started a conversation
    And the model streams 20000 pieces of 100 characters
    When alice opens the event stream and stops reading
    And alice sends "write me a novel"
    And the model has finished answering 1 time
    And turn 1 has a reply
    And alice reads her stream again
    Then alice's stream either coalesced the live text or ended it with a "reconnect" event
    And resuming from alice's last event id delivers the reply of turn 1 exactly once

  @profile:gateway @req:ADR0122-D6-07 @configures
  Scenario: A revoked token ends an open stream
    Given the setting "gateway.reauthMs" is 100
    And alice has started a conversation
    When alice opens the event stream
    And alice's token is revoked
    Then alice's stream ends

  @profile:gateway @req:ADR0122-D6-07 @configures
  Scenario: A token that now speaks for someone else ends an open stream
    Given the setting "gateway.reauthMs" is 100
    And alice has started a conversation
    When alice opens the event stream
    And alice's token now speaks for bob
    Then alice's stream ends

  @profile:gateway @req:ADR0122-D6-07 @configures
  Scenario Outline: A token that now speaks for an identity differing in one field alone ends an open stream
    Given the setting "gateway.reauthMs" is 100
    And alice has started a conversation
    When alice opens the event stream
    And alice's token now speaks for <principal>
    Then alice's stream ends

    Examples:
      | principal              |
      | alice at evil          |
      | alice without a tenant |
      | alice for bob          |

  @profile:gateway @req:ADR0122-D6-07 @configures
  Scenario: A token that still speaks for the same identity keeps its stream
    Given the setting "gateway.reauthMs" is 100
    And alice has started a conversation
    When alice opens the event stream
    And alice's token now speaks for alice's other token
    And 5 re-authorization periods pass
    And alice sends "still here"
    Then alice's stream delivers the reply of turn 1 with the text "re: still here"

  @profile:gateway @req:ADR0122-D6-08
  Scenario: A 500 is a fixed body with an error id; the real error goes to the error hook
    Given the identity service fails for alice's token, saying "ldap at 10.9.8.7 refused bind as cn=admin"
    When alice starts a conversation with id "anything"
    Then the answer is a 500 with an error id and nothing else
    And the error hook got that error id with the words "10.9.8.7"

  @profile:gateway @req:ADR0122-D6-09 @configures
  Scenario: Resuming with Last-Event-ID delivers every durable message once, across rotations
    Given the conversation rotates every 1 turn
    And alice has started a conversation
    And alice has had 2 turns answered
    When alice opens the event stream
    Then alice's stream has delivered 4 messages
    When alice closes her stream
    And alice has had 2 more turns answered
    And alice reconnects with the last event id she saw
    Then alice's new stream delivers records 5, 6, 7, 8, each once, with ids equal to their history cursors
    When alice reconnects with the cursor of record 6 as a query parameter
    Then alice's new stream delivers records 7, 8, each once, with ids equal to their history cursors

  @profile:gateway @req:ADR0122-D6-09
  Scenario: A stream that stays open follows commit after commit, each message once
    # After each commit the stream reads on strictly after the last message it sent, so a stream
    # woken again and again sends every record once. The model's default answer (spec/world.md) is
    # streamed; spec/http.md does not promise that all of a reply's live text arrives before its
    # record, so the deltas are the most the stream may show, and every message is exact.
    Given alice has started a conversation
    When alice opens the event stream
    And alice has had 2 turns answered
    And alice sends "that is all"
    Then alice's stream got these events before the message of turn 3, each turn's live text at most the table's:
      | event   | turn | role      | status   | text           |
      | status  |      |           |          |                |
      | message | 1    | user      | accepted | question 1     |
      | delta   | 1    |           |          | re: question 1 |
      | message | 1    | assistant | complete | re: question 1 |
      | message | 2    | user      | accepted | question 2     |
      | delta   | 2    |           |          | re: question 2 |
      | message | 2    | assistant | complete | re: question 2 |

  @profile:gateway @req:ADR0122-D6-30
  Scenario Outline: A body is read strictly, one way for every route, and a refused one changes nothing
    # One JSON value and nothing after it; members named exactly, once each, never null where the
    # contract wants a value; UTF-8 only, in raw bytes and in escapes; a charset only if it is
    # utf-8. A refusal names the member at fault ("body" when it is the body as a whole).
    # \xHH in a body is the byte HH; \ud800 is sent as it is written.
    Given alice has started a conversation
    And alice has had 1 turn answered
    And alice notes what her conversation holds
    When alice posts the body `<body>` to the <route> route as "<type>"
    Then the answer is <status> with the body `<answer>`
    And alice's conversation holds exactly what it held

    Examples: starting a conversation
      | route | type                             | body                              | status | answer                                            |
      | start | application/json                 | null                              | 400    | {"error":"bad request","detail":"body"}           |
      | start | application/json                 | {} }                              | 400    | {"error":"bad request","detail":"body"}           |
      | start | application/json                 | {}]                               | 400    | {"error":"bad request","detail":"body"}           |
      | start | application/json                 | {} {}                             | 400    | {"error":"bad request","detail":"body"}           |
      | start | application/json                 | {"Mode":"owner"}                  | 400    | {"error":"bad request","detail":"Mode"}           |
      | start | application/json                 | {"mode":"shared","mode":"owner"}  | 400    | {"error":"bad request","detail":"mode"}           |
      | start | application/json                 | {"mode":null}                     | 400    | {"error":"bad request","detail":"mode"}           |
      | start | application/json                 | {"mode":"own\xffer"}              | 400    | {"error":"bad request","detail":"mode"}           |
      | start | application/json                 | {"mode":"owner\ud800"}            | 400    | {"error":"bad request","detail":"mode"}           |
      | start | application/json; charset=latin1 | {}                                | 415    | {"error":"unsupported media type"}                |

    Examples: a turn
      | route | type                               | body                                    | status | answer                                       |
      | turns | application/json                   | null                                    | 400    | {"error":"bad request","detail":"body"}      |
      | turns | application/json                   | {"text":"hi"} }                         | 400    | {"error":"bad request","detail":"body"}      |
      | turns | application/json                   | {"text":"hi"}]                          | 400    | {"error":"bad request","detail":"body"}      |
      | turns | application/json                   | {"text":"hi"}{"text":"again"}           | 400    | {"error":"bad request","detail":"body"}      |
      | turns | application/json                   | {"text":"hi"} x                         | 400    | {"error":"bad request","detail":"body"}      |
      | turns | application/json                   | {"Text":"hi"}                           | 400    | {"error":"bad request","detail":"Text"}      |
      | turns | application/json                   | {"text":"hi","text":"again"}            | 400    | {"error":"bad request","detail":"text"}      |
      | turns | application/json                   | {"text":null}                           | 400    | {"error":"bad request","detail":"text"}      |
      | turns | application/json                   | {"messageId":"m-1"}                     | 400    | {"error":"bad request","detail":"text"}      |
      | turns | application/json                   | {"text":"hi","messageId":""}            | 400    | {"error":"bad request","detail":"messageId"} |
      | turns | application/json                   | {"text":"h\xffi"}                       | 400    | {"error":"bad request","detail":"text"}      |
      | turns | application/json                   | {"text":"h\xc3"}                        | 400    | {"error":"bad request","detail":"text"}      |
      | turns | application/json                   | {"text":"hi \ud800"}                    | 400    | {"error":"bad request","detail":"text"}      |
      | turns | application/json                   | {"text":"hi \udc00\ud800"}              | 400    | {"error":"bad request","detail":"text"}      |
      | turns | application/json; charset=latin1   | {"text":"hi"}                           | 415    | {"error":"unsupported media type"}           |
      | turns | application/json; charset=utf-16   | {"text":"hi"}                           | 415    | {"error":"unsupported media type"}           |

    Examples: closing
      | route | type                             | body                    | status | answer                                       |
      | close | application/json                 | null                    | 400    | {"error":"bad request","detail":"body"}      |
      | close | application/json                 | {} }                    | 400    | {"error":"bad request","detail":"body"}      |
      | close | application/json                 | {}]                     | 400    | {"error":"bad request","detail":"body"}      |
      | close | application/json                 | {}{}                    | 400    | {"error":"bad request","detail":"body"}      |
      | close | application/json                 | {"messageId":"c-1"}     | 400    | {"error":"bad request","detail":"messageId"} |
      | close | application/json                 | {"\xff":1}              | 400    | {"error":"bad request","detail":"body"}      |
      | close | application/json; charset=latin1 | {}                      | 415    | {"error":"unsupported media type"}           |

    Examples: changing the participants
      | route        | type                             | body                                                     | status | answer                                            |
      | participants | application/json                 | null                                                     | 400    | {"error":"bad request","detail":"body"}           |
      | participants | application/json                 | {"op":"add","identity":{"actor":"bob"}} }                | 400    | {"error":"bad request","detail":"body"}           |
      | participants | application/json                 | {"op":"add","identity":{"actor":"bob"}}]                 | 400    | {"error":"bad request","detail":"body"}           |
      | participants | application/json                 | {"OP":"add","identity":{"actor":"bob"}}                  | 400    | {"error":"bad request","detail":"OP"}             |
      | participants | application/json                 | {"op":"add","op":"remove","identity":{"actor":"bob"}}    | 400    | {"error":"bad request","detail":"op"}             |
      | participants | application/json                 | {"op":"add","identity":{"Actor":"bob"}}                  | 400    | {"error":"bad request","detail":"identity.Actor"} |
      | participants | application/json                 | {"op":"add","identity":{"actor":"bob","actor":"eve"}}    | 400    | {"error":"bad request","detail":"identity.actor"} |
      | participants | application/json                 | {"op":"add","identity":null}                             | 400    | {"error":"bad request","detail":"identity"}       |
      | participants | application/json                 | {"op":"add","identity":{"actor":"b\xffob"}}              | 400    | {"error":"bad request","detail":"identity.actor"} |
      | participants | application/json                 | {"op":"add","identity":{"actor":"bob\ud800"}}            | 400    | {"error":"bad request","detail":"identity.actor"} |
      | participants | application/json; charset=latin1 | {"op":"add","identity":{"actor":"bob"}}                  | 415    | {"error":"unsupported media type"}                |

    Examples: the runtime door
      | route         | type                             | body                                                              | status | answer                                           |
      | runtime send  | application/json                 | null                                                              | 400    | {"error":"bad request","detail":"body"}          |
      | runtime send  | application/json                 | {"messageId":"m-1","payload":{}} }                                | 400    | {"error":"bad request","detail":"body"}          |
      | runtime send  | application/json                 | {"messageId":"m-1","payload":{}}]                                 | 400    | {"error":"bad request","detail":"body"}          |
      | runtime send  | application/json                 | {"messageId":"m-1","Payload":{}}                                  | 400    | {"error":"bad request","detail":"Payload"}       |
      | runtime send  | application/json                 | {"messageId":"m-1","messageId":"m-2","payload":{}}                | 400    | {"error":"bad request","detail":"messageId"}     |
      | runtime send  | application/json                 | {"messageId":"m-1","payload":{"text":"a","text":"b"}}             | 400    | {"error":"bad request","detail":"payload.text"}  |
      | runtime send  | application/json                 | {"messageId":"m-1","payload":{"text":"\xff"}}                     | 400    | {"error":"bad request","detail":"payload.text"}  |
      | runtime send  | application/json                 | {"messageId":"m-1","payload":{"text":"\ud800"}}                   | 400    | {"error":"bad request","detail":"payload.text"}  |
      | runtime send  | application/json                 | {"messageId":"m-1","payload":null}                                | 400    | {"error":"bad request","detail":"payload"}       |
      | runtime send  | application/json                 | {"messageId":"","payload":{}}                                     | 400    | {"error":"bad request","detail":"messageId"}     |
      | runtime send  | application/json; charset=latin1 | {"messageId":"m-1","payload":{}}                                  | 415    | {"error":"unsupported media type"}               |
      | runtime start | application/json                 | null                                                              | 400    | {"error":"bad request","detail":"body"}          |
      | runtime start | application/json                 | {"id":"x-1","flow":"conversation.turn","input":{}} }              | 400    | {"error":"bad request","detail":"body"}          |
      | runtime start | application/json                 | {"id":"x-1","flow":"conversation.turn","input":{},"Input":1}      | 400    | {"error":"bad request","detail":"Input"}         |
      | runtime start | application/json                 | {"id":"x-1","flow":"conversation.turn","input":{"a":1,"a":2}}     | 400    | {"error":"bad request","detail":"input.a"}       |
      | runtime start | application/json                 | {"id":"x-1","flow":"conversation.turn"}                           | 400    | {"error":"bad request","detail":"input"}         |
      | runtime start | application/json; charset=latin1 | {"id":"x-1","flow":"conversation.turn","input":{}}                | 415    | {"error":"unsupported media type"}               |

  @profile:gateway @req:ADR0122-D6-30
  Scenario Outline: A body in UTF-8 is taken whether or not its Content-Type says so
    Given alice has started a conversation
    When alice posts the body `{"text":"h\xc3\xa9 \ud83d\ude00"}` to the turns route as "<type>"
    Then the answer is 202
    And turn 1 is answered "re: hé 😀"

    Examples:
      | type                              |
      | application/json                  |
      | application/json; charset=utf-8   |
      | application/json; charset=UTF-8   |
      | application/json;charset=Utf-8    |
