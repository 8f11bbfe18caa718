// Child process of reply.ts: a loopback HTTP server that answers `GET /<bytes>/<plain|gzip>` with a Chat
// Completions body of that many bytes, made and (for gzip) compressed once at start, so serving is only writing a
// buffer and none of it is timed as the client's. Prints its base URL, then serves until its stdin closes.
// Usage: node --import tsx scripts/bench/reply-child.ts <bytes> [<bytes> …]
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { replyBody } from "./reply-body.js";

const bodies = new Map<string, Buffer>();
for (const size of process.argv.slice(2).map(Number)) {
  const plain = replyBody(size);
  bodies.set(`/${size}/plain`, plain);
  bodies.set(`/${size}/gzip`, gzipSync(plain));
}

const server = createServer((request, response) => {
  const body = bodies.get(request.url ?? "");
  request.resume();
  if (body === undefined) {
    response.writeHead(404).end();
    return;
  }
  response.writeHead(200, {
    "content-type": "application/json",
    "content-length": body.byteLength,
    ...(request.url?.endsWith("/gzip") === true ? { "content-encoding": "gzip" } : {}),
  });
  response.end(body);
});
server.listen(0, "127.0.0.1", () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`http://127.0.0.1:${port}\n`);
});
process.stdin.resume();
process.stdin.once("end", () => {
  server.closeAllConnections();
  server.close();
});
