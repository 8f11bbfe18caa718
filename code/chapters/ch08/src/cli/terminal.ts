import type { Writable } from "node:stream";

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

export interface TerminalOptions {
  /** Draw the waiting status line; only where the stream is a terminal. */
  readonly interactive: boolean;
  /** ANSI colours; off when NO_COLOR is set or the stream is not a terminal. */
  readonly color: boolean;
}

/** Everything the CLI writes for a person goes through here, so a status line never garbles it. */
export class Terminal {
  private spinner: NodeJS.Timeout | undefined;

  constructor(
    private readonly stream: Writable,
    private readonly options: TerminalOptions,
  ) {}

  line(text: string): void {
    this.clearStatus();
    this.stream.write(`${text}\n`);
  }

  /** Writes without a newline, for a question the user answers on the same line. */
  prompt(text: string): void {
    this.clearStatus();
    this.stream.write(text);
  }

  /** A one-line status with a spinner, replaced by the next line written. */
  status(text: string): void {
    if (!this.options.interactive) return;
    this.clearStatus();
    let frame = 0;
    const draw = (): void => {
      this.stream.write(`\r\x1b[2K${this.dim(`${FRAMES[frame % FRAMES.length]} ${text}`)}`);
      frame += 1;
    };
    draw();
    this.spinner = setInterval(draw, 80);
    this.spinner.unref();
  }

  clearStatus(): void {
    if (this.spinner === undefined) return;
    clearInterval(this.spinner);
    this.spinner = undefined;
    this.stream.write("\r\x1b[2K");
  }

  green(text: string): string {
    return this.paint(32, text);
  }
  red(text: string): string {
    return this.paint(31, text);
  }
  yellow(text: string): string {
    return this.paint(33, text);
  }
  dim(text: string): string {
    return this.paint(2, text);
  }

  private paint(code: number, text: string): string {
    return this.options.color ? `\x1b[${code}m${text}\x1b[0m` : text;
  }
}
