import http from "node:http";
import { Webhook } from "standardwebhooks";

// Callbacks are signed as Standard Webhooks says, with your callback secret (whsec_...).
const webhook = new Webhook(process.env.STUDIO_CALLBACK_SECRET);

const receiver = http.createServer((req, res) => {
  let body = "";
  req.on("data", (part) => (body += part));
  req.on("end", () => {
    try {
      const callback = webhook.verify(body, req.headers); // throws unless the signature matches
      console.log("callback:", callback.job_id, callback.status, callback.cdn_url);
      res.writeHead(204).end();
    } catch (err) {
      console.error("refused:", err.message);
      res.writeHead(400).end();
      process.exitCode = 1;
    }
    receiver.close();
  });
});

receiver.listen(0, "127.0.0.1", async () => {
  const callbackURL = `http://127.0.0.1:${receiver.address().port}/studio-callback`;
  const res = await fetch(`${process.env.STUDIO_URL}/api/generate`, {
    method: "POST",
    headers: { "X-API-Key": process.env.STUDIO_API_KEY, "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: "a lighthouse at dawn", callback_url: callbackURL }),
  });
  const job = await res.json();
  if (!res.ok) {
    // e.g. 400 "invalid": a loopback callback_url needs SERVICE_ALLOW_PRIVATE_URLS=true on the server.
    console.error("submit refused:", res.status, job.code, job.error);
    process.exitCode = 1;
    receiver.close();
    return;
  }
  console.log("submitted:", job.jobId);
});
