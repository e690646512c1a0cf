// Drives the kit's scripted model (harness/world) with the official OpenAI client and prints what
// the client saw as one JSON object, so a Go test can compare it whole. Usage:
//   node tools/lint/openai-client.mjs http://127.0.0.1:PORT/v1
// The world must have been scripted with: "Hi there" (plain), "Hel" "lo" (streamed with usage),
// "A" "B" (keep-alive comments and several data lines); the fourth request is refused (no messages);
// the fifth is streamed a text filled to 262145 characters and a tool call whose arguments are.
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "k", maxRetries: 0 });
const messages = [{ role: "user", content: "hello" }];
const out = {};

const plain = await client.chat.completions.create({ model: "m", messages });
out.plain = {
  content: plain.choices[0].message.content,
  finish: plain.choices[0].finish_reason,
  usage: plain.usage,
  sum: plain.usage.prompt_tokens + plain.usage.completion_tokens === plain.usage.total_tokens,
};

async function streamed(opts) {
  const stream = await client.chat.completions.create({ model: "m", messages, stream: true, ...opts });
  let content = "";
  let finish = null;
  let usage = null;
  let usageChunks = 0;
  for await (const chunk of stream) {
    if (chunk.choices.length === 0) usageChunks++;
    for (const c of chunk.choices) {
      content += c.delta.content ?? "";
      finish = c.finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  return { content, finish, usage, usageChunks };
}
out.streamWithUsage = await streamed({ stream_options: { include_usage: true } });
out.streamKeepAliveMultiLine = await streamed({});

try {
  await client.chat.completions.create({ model: "m", messages: [] });
  out.refusal = "accepted";
} catch (err) {
  out.refusal = { status: err.status, type: err.type, hasMessage: typeof err.error?.message === "string" };
}
const big = await client.chat.completions.create({ model: "m", messages, stream: true });
let bigText = "";
let bigArgs = "";
let bigFinish = null;
for await (const chunk of big) {
  for (const c of chunk.choices) {
    bigText += c.delta.content ?? "";
    for (const tc of c.delta.tool_calls ?? []) bigArgs += tc.function?.arguments ?? "";
    bigFinish = c.finish_reason ?? bigFinish;
  }
}
out.big = {
  contentLength: [...bigText].length,
  argsLength: [...bigArgs].length,
  argsFill: typeof JSON.parse(bigArgs).fill === "string",
  finish: bigFinish,
};
console.log(JSON.stringify(out));
