import type { ReactNode } from 'react';

// Inline icons (no icon font, no network): 16×16, stroke in the current colour.

interface IconProps {
  title?: string;
  className?: string;
}

function Svg({ title, className, children }: IconProps & { children: ReactNode }) {
  return (
    <svg
      className={`icon ${className ?? ''}`}
      viewBox="0 0 16 16"
      width="16"
      height="16"
      fill="none"
      stroke="currentColor"
      strokeWidth="1.5"
      strokeLinecap="round"
      strokeLinejoin="round"
      aria-hidden={title ? undefined : true}
      role={title ? 'img' : undefined}
    >
      {title && <title>{title}</title>}
      {children}
    </svg>
  );
}

export function LogoIcon() {
  return (
    <svg className="logo" viewBox="0 0 24 24" width="24" height="24" aria-hidden="true">
      <rect x="2" y="3" width="20" height="5" rx="1.5" fill="#2563eb" />
      <rect x="2" y="9.5" width="20" height="5" rx="1.5" fill="#60a5fa" />
      <rect x="2" y="16" width="20" height="5" rx="1.5" fill="#bfdbfe" />
    </svg>
  );
}

export function LockIcon(props: IconProps) {
  return (
    <Svg {...props}>
      <rect x="3" y="7" width="10" height="7" rx="1.5" />
      <path d="M5.5 7V5a2.5 2.5 0 0 1 5 0v2" />
    </Svg>
  );
}

export function ExternalIcon(props: IconProps) {
  return (
    <Svg {...props}>
      <path d="M9 3h4v4M13 3 7.5 8.5M11 9.5V13H3V5h3.5" />
    </Svg>
  );
}

export function TrashIcon(props: IconProps) {
  return (
    <Svg {...props}>
      <path d="M2.5 4h11M6 4V2.5h4V4M4 4l.7 9.5h6.6L12 4" />
    </Svg>
  );
}

export function SearchIcon(props: IconProps) {
  return (
    <Svg {...props}>
      <circle cx="7" cy="7" r="4.5" />
      <path d="m10.5 10.5 3 3" />
    </Svg>
  );
}

export function ArchiveIcon(props: IconProps) {
  return (
    <Svg {...props}>
      <rect x="2" y="3" width="12" height="3" rx="1" />
      <path d="M3 6v7h10V6M6.5 8.5h3" />
    </Svg>
  );
}

export function KeyIcon(props: IconProps) {
  return (
    <Svg {...props}>
      <circle cx="5" cy="11" r="2.5" />
      <path d="M6.8 9.2 13 3M11 5l1.5 1.5M9.5 6.5 11 8" />
    </Svg>
  );
}
