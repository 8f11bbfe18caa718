/**
 * Keeps the head and the tail of a byte stream within a fixed budget, however much is pushed:
 * a command that prints a gigabyte costs `maxBytes` of memory, not a gigabyte.
 */
export class OutputBuffer {
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  private totalBytes = 0;

  constructor(private readonly maxBytes: number) {}

  get truncated(): boolean {
    return this.totalBytes > this.maxBytes;
  }

  /** Whether `bytes` more would no longer fit, so the head and tail would lose the middle. */
  wouldOverflow(bytes: number): boolean {
    return this.totalBytes + bytes > this.maxBytes;
  }

  /** Every byte pushed so far; only meaningful while nothing was cut. */
  contents(): Buffer {
    return Buffer.concat([...this.head, ...this.tail]);
  }

  push(chunk: Buffer): void {
    this.totalBytes += chunk.length;
    const headRoom = Math.ceil(this.maxBytes / 2) - this.headBytes;
    if (headRoom > 0) {
      const taken = chunk.subarray(0, headRoom);
      this.head.push(Buffer.from(taken));
      this.headBytes += taken.length;
      chunk = chunk.subarray(taken.length);
    }
    if (chunk.length > 0) this.pushTail(chunk);
  }

  /** All output when it fit; otherwise head, a line saying how much was left out, and tail. */
  text(): string {
    const head = Buffer.concat(this.head).toString("utf8");
    const tail = Buffer.concat(this.tail).toString("utf8");
    if (!this.truncated) return head + tail;
    const omitted = this.totalBytes - this.headBytes - this.tailBytes;
    return `${head}\n[... ${omitted} bytes omitted ...]\n${tail}`;
  }

  private pushTail(chunk: Buffer): void {
    const tailCap = Math.floor(this.maxBytes / 2);
    this.tail.push(Buffer.from(chunk.subarray(Math.max(0, chunk.length - tailCap))));
    this.tailBytes += Math.min(chunk.length, tailCap);
    while (this.tailBytes > tailCap) {
      const first = this.tail[0] as Buffer;
      const excess = this.tailBytes - tailCap;
      if (first.length <= excess) {
        this.tail.shift();
        this.tailBytes -= first.length;
      } else {
        this.tail[0] = first.subarray(excess);
        this.tailBytes -= excess;
      }
    }
  }
}
