import { StringDecoder } from "node:string_decoder";

/** Which pipe a chunk came from: each has its own decoder, so a character split in one is not garbled by the other. */
export type OutputStream = "stdout" | "stderr";

/**
 * Keeps the first `maxChars` characters of two UTF-8 byte streams, merged in arrival order, and drops
 * the rest as it arrives: a command that prints a gigabyte costs `maxChars` of memory, not a gigabyte.
 */
export class OutputBuffer {
  readonly #decoders: Record<OutputStream, StringDecoder> = {
    stdout: new StringDecoder("utf8"),
    stderr: new StringDecoder("utf8"),
  };
  #text = "";
  #truncated = false;

  constructor(private readonly maxChars: number) {}

  /** True once anything past the first `maxChars` characters arrived. */
  get truncated(): boolean {
    return this.#truncated;
  }

  push(chunk: Buffer, stream: OutputStream = "stdout"): void {
    if (this.#truncated) return;
    this.#append(this.#decoders[stream].write(chunk));
  }

  /** What was kept; call once both streams have ended. */
  text(): string {
    if (!this.#truncated) this.#append(this.#decoders.stdout.end());
    if (!this.#truncated) this.#append(this.#decoders.stderr.end());
    return this.#text;
  }

  #append(decoded: string): void {
    const room = this.maxChars - this.#text.length;
    if (decoded.length <= room) {
      this.#text += decoded;
      return;
    }
    // Never cut a surrogate pair in half: the kept text stays valid Unicode.
    const cut = isHighSurrogate(decoded.charCodeAt(room - 1)) ? room - 1 : room;
    this.#text += decoded.slice(0, Math.max(cut, 0));
    this.#truncated = true;
  }
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
