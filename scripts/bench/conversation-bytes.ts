// The run-wide budget's measuring routine, copied from code/chapters/ch04/src/core/loop.ts, where it is not
// exported and the runner has no switch to leave it out. budget.ts times this copy on the runner's own history and
// first checks that the text between the two markers below is, character for character, the text in loop.ts.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { ChatMessage } from "../../code/chapters/ch04/src/core/messages.js";

export const LOOP_SOURCE = fileURLToPath(new URL("../../code/chapters/ch04/src/core/loop.ts", import.meta.url));

// --- copied from loop.ts, from here ---
/** Each message's size, measured once: the history only grows, and its messages are frozen. */
const messageSizes = new WeakMap<ChatMessage, number>();

function conversationBytes(history: readonly ChatMessage[]): number {
  const encoder = new TextEncoder();
  let total = 0;
  for (const message of history) {
    let size = messageSizes.get(message);
    if (size === undefined) {
      const calls = message.role === "assistant" ? message.toolCalls : [];
      const parts = [message.content ?? "", ...calls.flatMap((call) => [call.id, call.name, call.arguments])];
      size = parts.reduce((sum, part) => sum + encoder.encode(JSON.stringify(part)).byteLength, 0);
      messageSizes.set(message, size);
    }
    total += size;
  }
  return total;
}
// --- to here ---

export { conversationBytes };

/** Throws unless the copy above is still the routine in loop.ts: a bench of other code would be worse than none. */
export function checkCopy(): void {
  const ours = readFileSync(fileURLToPath(import.meta.url), "utf8");
  const from = "// --- copied from loop.ts, from here ---\n";
  const copied = ours.slice(ours.indexOf(from) + from.length, ours.indexOf("// --- to here"));
  if (!readFileSync(LOOP_SOURCE, "utf8").includes(copied) || !copied.includes("function conversationBytes(")) {
    throw new Error("budget bench: scripts/bench/conversation-bytes.ts no longer matches conversationBytes in loop.ts");
  }
}
