import { describe, expect, it } from "vitest";
import { OutputBuffer } from "../src/adapters/output-buffer.js";

describe("OutputBuffer", () => {
  it("keeps everything while under the cap", () => {
    const buffer = new OutputBuffer(10);
    buffer.push(Buffer.from("abc"));
    buffer.push(Buffer.from("defghij"));
    expect(buffer.truncated).toBe(false);
    expect(buffer.text()).toBe("abcdefghij");
  });

  it("keeps the head and the tail and counts what it left out", () => {
    const buffer = new OutputBuffer(10);
    for (const piece of ["abcdefgh", "ijklmnop", "qrstuvwxyz"]) buffer.push(Buffer.from(piece));
    expect(buffer.truncated).toBe(true);
    expect(buffer.text()).toBe("abcde\n[... 16 bytes omitted ...]\nvwxyz");
  });

  it("holds no more than its cap however much is pushed", () => {
    const buffer = new OutputBuffer(1024);
    const chunk = Buffer.alloc(64 * 1024, "z");
    for (let i = 0; i < 2_000; i += 1) buffer.push(chunk); // 128 MB through a 1 KB buffer
    const text = buffer.text();
    expect(text.replace(/\n\[\.\.\. \d+ bytes omitted \.\.\.\]\n/, "")).toBe("z".repeat(1024));
    expect(text).toContain(`[... ${2_000 * 64 * 1024 - 1024} bytes omitted ...]`);
  });
});
