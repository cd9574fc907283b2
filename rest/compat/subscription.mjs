import { createClient } from "graphql-ws";
import WebSocket from "ws";

// Submit an image job over REST...
const job = await fetch(`${process.env.STUDIO_URL}/api/generate`, {
  method: "POST",
  headers: { "X-API-Key": process.env.STUDIO_API_KEY, "Content-Type": "application/json" },
  body: JSON.stringify({ prompt: "a lighthouse at dawn" }),
}).then((res) => res.json());

// ...and follow it over GraphQL (graphql-transport-ws); the key goes in the connection parameters.
const client = createClient({
  url: `${process.env.STUDIO_URL.replace(/^http/, "ws")}/graphql`,
  webSocketImpl: WebSocket,
  connectionParams: { "X-API-Key": process.env.STUDIO_API_KEY },
});
const updates = client.iterate({
  query: "subscription ($id: ID!) { jobProgress(id: $id) { jobId status progress cdnUrl } }",
  variables: { id: job.jobId },
});
for await (const { data } of updates) {
  // The first message is the job's current state; the stream completes once it is done or failed.
  console.log("job:", data.jobProgress.jobId, data.jobProgress.status, data.jobProgress.cdnUrl ?? data.jobProgress.progress);
}
await client.dispose();
