import { createInterface, type Interface } from "node:readline";
import type { Readable } from "node:stream";
import { PermissionDecision, type ApprovalProvider, type PermissionRequest } from "../core/permissions.js";
import type { Terminal } from "./terminal.js";
import { visible } from "./visible.js";

/** Only these answers allow a call; anything else, an empty line or end of input refuses it. */
export function isYes(answer: string): boolean {
  return /^(y|yes)$/i.test(answer.trim());
}

/**
 * Asks on the terminal before each call. With no terminal on stdin nobody can answer, so it
 * refuses without asking: a pipe or a CI job never approves anything by accident.
 */
export class TerminalApprovalProvider implements ApprovalProvider {
  private lines: AsyncIterator<string> | undefined;
  private reader: Interface | undefined;

  constructor(
    private readonly input: Readable,
    private readonly terminal: Terminal,
    private readonly inputIsTTY: boolean,
  ) {}

  async requestApproval(request: PermissionRequest, pending: PermissionDecision): Promise<PermissionDecision> {
    if (!this.inputIsTTY) {
      this.terminal.line("无交互输入，默认拒绝。");
      return new PermissionDecision("deny", "No interactive approval input was available", "terminal-approval");
    }
    this.terminal.line(`工具调用需要批准: ${visible(request.toolName)}`);
    this.terminal.line(`原因: ${visible(pending.reason)}`);
    this.terminal.line(`参数: ${visible(JSON.stringify(request.prepared.arguments))}`);
    this.terminal.prompt("允许本次调用? [y/N] ");
    const next = await this.nextLine();
    return next !== undefined && isYes(next)
      ? new PermissionDecision("allow", "Approved by the user", "user")
      : new PermissionDecision("deny", "Denied by the user", "user");
  }

  /** Releases stdin so the process can exit. */
  close(): void {
    this.reader?.close();
  }

  private async nextLine(): Promise<string | undefined> {
    if (this.lines === undefined) {
      // One reader for the whole run: lines typed ahead are queued, not lost between questions.
      this.reader = createInterface({ input: this.input, crlfDelay: Infinity });
      this.lines = this.reader[Symbol.asyncIterator]();
    }
    const result = await this.lines.next();
    return result.done === true ? undefined : result.value;
  }
}
