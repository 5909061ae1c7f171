import type { Permission } from '../access';

/** Why a control is disabled: the scope it needs and the scopes the key has. Nothing when it is allowed. */
export function ScopeNote({ permission }: { permission: Permission }) {
  if (permission.allowed) return null;
  return (
    <p className="scope-note" data-testid="scope-note">
      {permission.reason}
    </p>
  );
}

/** The `title` of a control the key may not use. */
export function whyNot(permission: Permission): string | undefined {
  return permission.allowed ? undefined : permission.reason;
}
