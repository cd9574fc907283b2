import OpenAI from "openai";

// The official OpenAI SDK, pointed at studio: base URL {studio}/api, a studio key as the API key.
const client = new OpenAI({ baseURL: `${process.env.STUDIO_URL}/api`, apiKey: process.env.STUDIO_API_KEY });

// The model is always service-auto: smart routing chooses the upstream model and provider.
const answer = await client.chat.completions.create({
  model: "service-auto",
  messages: [{ role: "user", content: "Write a one-line slogan for a tea shop." }],
});
console.log("chat:", answer.choices[0].message.content, "| tokens:", answer.usage.total_tokens, "| request:", answer._request_id);

// Streamed, with the token usage in the last chunk.
const stream = await client.chat.completions.create({
  model: "service-auto",
  messages: [{ role: "user", content: "Now a longer one." }],
  stream: true,
  stream_options: { include_usage: true },
});
let text = "";
let usage;
for await (const chunk of stream) {
  text += chunk.choices[0]?.delta?.content ?? "";
  usage = chunk.usage ?? usage;
}
console.log("stream:", text, "| tokens:", usage.total_tokens);

// The models: service-auto, then the chat families it routes over.
for await (const model of client.models.list()) {
  console.log("model:", model.id);
}

// Errors have OpenAI's shape, so the SDK raises its own error types.
try {
  await client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] });
} catch (err) {
  if (!(err instanceof OpenAI.BadRequestError)) throw err;
  console.log("error:", err.status, err.code, err.param, err.message);
}
