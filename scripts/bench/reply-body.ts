// The reply the reply-cap bench reads: a Chat Completions body of an exact size whose answer is varied text
// (ASCII code, Chinese comments, quotes and newlines to escape), so gzip shrinks it about as much as a real one.

const WORDS = [
  "const",
  "result",
  "await",
  "history",
  "return",
  "request",
  "模型",
  "工具",
  "结果",
  "对话",
  '"quoted"',
  "path/to/file.ts",
  "{ id: 42 }",
  "=>",
];

/** Exactly `bytes` bytes of UTF-8 JSON; the same bytes on every call. */
export function replyBody(bytes: number): Buffer {
  const head =
    '{"id":"chatcmpl-bench","object":"chat.completion","created":0,"model":"loopback","choices":[{"index":0,';
  const tail = '"finish_reason":"stop"}]}';
  const open = '"message":{"role":"assistant","content":"';
  const close = '"},';
  const room = bytes - Buffer.byteLength(head + open + close + tail);
  if (room < 0) throw new RangeError(`a reply body needs at least ${bytes - room} bytes`);
  let seed = 1;
  const parts: string[] = [];
  let used = 0;
  while (used < room) {
    seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
    const pick = seed >>> 16;
    const word = WORDS[pick % WORDS.length] as string;
    const text = (JSON.stringify(word).slice(1, -1) + (pick % 11 === 0 ? "\\n" : " ")).slice(0, room - used);
    // A cut may not split an escape or a character: pad with spaces instead.
    const fits = Buffer.byteLength(text) <= room - used && !text.endsWith("\\");
    const piece = fits ? text : " ".repeat(room - used);
    parts.push(piece);
    used += Buffer.byteLength(piece);
  }
  const body = Buffer.from(head + open + parts.join("") + close + tail);
  if (body.byteLength !== bytes) throw new Error(`reply body is ${body.byteLength} bytes, not ${bytes}`);
  return body;
}
