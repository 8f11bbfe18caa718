// Child process of loop.ts: the loopback OpenAI-compatible server of the ch03 tests, in its own process so
// its work (parsing requests, writing replies) is not counted as the agent loop's. Prints its base URL,
// then serves until its stdin closes. The reply depends only on the request, so every run is the same
// conversation: a `glob` call while fewer than `turns - 1` tool results are in the history, then "done".
// Usage: node --import tsx scripts/bench/loopback-child.ts <turns>
import { completion, startLoopbackOpenAI } from "../../code/chapters/ch03/tests/support/loopback-openai.js";

const turns = Number(process.argv[2] ?? "100");
const server = await startLoopbackOpenAI((body) => {
  // The helper records every request for tests; a bench would only grow its heap with them.
  server.requests.length = 0;
  server.headers.length = 0;
  const messages = (body as { messages?: { role?: string }[] }).messages ?? [];
  const done = messages.filter((message) => message.role === "tool").length;
  return {
    json:
      done < turns - 1
        ? completion({ toolCalls: [{ id: `call_${done}`, name: "glob", arguments: '{"pattern":"*.txt"}' }] })
        : completion({ content: "done" }),
  };
});
process.stdout.write(`${server.baseURL}\n`);
process.stdin.resume();
process.stdin.once("end", () => void server.close());
