import { Writable } from "node:stream";

/**
 * A writable that keeps everything written to it as text, synchronously, so nothing arrives late.
 * Each write is also announced as a `text` event, for a test that reacts to what it sees.
 */
export class Sink extends Writable {
  text = "";
  override _write(chunk: unknown, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.text += Buffer.isBuffer(chunk) ? chunk.toString("utf8") : String(chunk);
    this.emit("text");
    callback();
  }
}
