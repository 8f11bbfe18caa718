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
  /** What is running now (a tool call) and since when: drawn again under every line until `idle()`. */
  private working: { readonly label: string; readonly since: number } | undefined;
  /** A question is waiting for its answer: nothing may be drawn on its line until `resume()`. */
  private asking = false;
  /** Whether the status is on screen now, to be erased before the next line. */
  private drawn = false;

  constructor(
    private readonly stream: Writable,
    private readonly options: TerminalOptions,
  ) {}

  line(text: string): void {
    this.clearStatus();
    this.stream.write(`${text}\n`);
    this.drawWorking();
  }

  /** Writes without a newline, for a question the user answers on the same line. */
  prompt(text: string): void {
    this.clearStatus();
    this.asking = true;
    this.stream.write(text);
  }

  /** The question was answered: what is running may show again. */
  resume(): void {
    this.asking = false;
    // The call runs from the answer on: the time the question waited is not the command's.
    if (this.working !== undefined) this.working = { label: this.working.label, since: Date.now() };
    this.drawWorking();
  }

  /** A one-line status with a spinner, replaced by the next line written. */
  status(text: string): void {
    this.spin(() => text);
  }

  /**
   * `label` is running: a status with the seconds it has run, kept under every line written until `idle()`, so a
   * long command approved a minute ago does not look like a hung agent. Only where `status` draws.
   */
  busy(label: string): void {
    this.working = { label, since: Date.now() };
    this.drawWorking();
  }

  idle(): void {
    this.working = undefined;
    this.clearStatus();
  }

  /** The running call's status, from its first second on: a call that ends sooner (most do) draws nothing. */
  private drawWorking(): void {
    const working = this.working;
    if (working === undefined || this.asking) return;
    this.spin(() => {
      const seconds = Math.floor((Date.now() - working.since) / 1000);
      return seconds < 1 ? undefined : `${working.label} (${seconds} 秒)…`;
    });
  }

  /** Draws `text()` with a spinner every 80 ms, from now on; a frame for which it is `undefined` draws nothing. */
  private spin(text: () => string | undefined): void {
    // Nothing is drawn on a question's line while it waits for its answer.
    if (!this.options.interactive || this.asking) return;
    this.clearStatus();
    let frame = 0;
    const draw = (): void => {
      const shown = text();
      if (shown === undefined) return;
      this.stream.write(`\r\x1b[2K${this.dim(`${FRAMES[frame % FRAMES.length]} ${shown}`)}`);
      this.drawn = true;
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
    if (this.drawn) this.stream.write("\r\x1b[2K");
    this.drawn = false;
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
