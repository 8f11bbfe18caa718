import { findPowerShell } from "../../src/adapters/powershell.js";

/**
 * The PowerShell executable for tests that need the real thing. They may skip on a developer's
 * machine without PowerShell, but never in CI: there a missing pwsh is a failure, not a skip.
 */
export const powershell = findPowerShell();

if (powershell === undefined && process.env.CI === "true") {
  // .ci/run sets PWSH_INSTALL_FAILED only after it has reported a failed install loudly.
  if (process.env.PWSH_INSTALL_FAILED !== "1") {
    throw new Error("CI=true but PowerShell 7 (pwsh) was not found: .ci/run must install it");
  }
  console.warn("PowerShell install failed in CI: PowerShell tests are skipped (see .ci/run output)");
}
