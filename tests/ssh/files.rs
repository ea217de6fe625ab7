//! Writing files and uploads: atomic, checked, and never through a link planted at the
//! destination.

use super::*;

/// The permission bits of a local file.
fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread")]
async fn write_file_and_upload_are_atomic_and_checked() {
    require_lab!();
    let sshd = Sshd::start();
    let t = connected(&sshd, "root").await;
    // Paths with spaces and quotes: quoting must hold here too.
    let target_dir = sshd.path("it's a dir");
    let dest = target_dir.join("k0s token");
    t.write_file(
        &sshd.id(),
        dest.to_str().unwrap(),
        b"secret\n".to_vec(),
        &FileAttrs::mode(0o600),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), b"secret\n");
    assert_eq!(mode_of(&dest), 0o600);
    // Overwrite in place, new mode.
    t.write_file(
        &sshd.id(),
        dest.to_str().unwrap(),
        b"v2".to_vec(),
        &FileAttrs::mode(0o644),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), b"v2");
    assert_eq!(mode_of(&dest), 0o644);
    let leftovers: Vec<_> = std::fs::read_dir(&target_dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("k0sform"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // upload_file: 3 MiB of non-trivial bytes.
    let local = sshd.path("local-bin");
    let data: Vec<u8> = (0..3 * 1024 * 1024u32)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    std::fs::write(&local, &data).unwrap();
    let expect_sha = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&data))
    };
    let remote = target_dir.join("bin/k0s");
    let remote_s = remote.to_str().unwrap();
    let up = t
        .upload_file_report(&sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert_eq!(up.sha256, expect_sha);
    assert!(!up.skipped);
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    assert_eq!(mode_of(&remote), 0o755);
    assert!(no_staging_files(remote.parent().unwrap()));
    // Same content again: skipped, nothing sent.
    let mtime = std::fs::metadata(&remote).unwrap().modified().unwrap();
    let same = t
        .upload_file_report(&sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert!(same.skipped);
    assert_eq!(
        std::fs::metadata(&remote).unwrap().modified().unwrap(),
        mtime
    );
    // Same content, other mode: still nothing sent, the mode is set on a copy made on the host.
    std::fs::set_permissions(&remote, std::fs::Permissions::from_mode(0o700)).unwrap();
    let up2 = t
        .upload_file_report(&sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert!(up2.skipped);
    assert_eq!(up2.sha256, expect_sha);
    assert_eq!(mode_of(&remote), 0o755);
    assert!(no_staging_files(remote.parent().unwrap()));
    // Changed remote content: uploaded again.
    std::fs::write(&remote, b"tampered").unwrap();
    let up3 = t
        .upload_file_report(&sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert!(!up3.skipped);
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    // Through the trait (what the generic executor calls): the sha256 of what is now there.
    std::fs::write(&remote, b"tampered again").unwrap();
    let sha = Transport::upload_file(&t, &sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert_eq!(sha, expect_sha);
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    // upload_new_file (a staging path nothing of this run is at): one session, no check first,
    // and whatever is there is replaced, the same bytes too (a new file, not the old inode).
    let sessions = || sshd.log().matches("Starting session").count();
    let before = sessions();
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&remote).unwrap());
    let sha = t
        .upload_new_file(&sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert_eq!(sha, expect_sha);
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    assert_ne!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&remote).unwrap()),
        inode
    );
    assert!(no_staging_files(remote.parent().unwrap()));
    std::fs::write(&remote, b"tampered once more").unwrap();
    t.upload_new_file(&sshd.id(), &local, remote_s, &FileAttrs::mode(0o755))
        .await
        .unwrap();
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    assert_eq!(mode_of(&remote), 0o755);
    // sshd logs a session's start as it begins; give the second one a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while sessions() < before + 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(sessions(), before + 2, "{}", sshd.log());

    // A local file that changed since planning (its planned sha256 is another): refused,
    // nothing moved into place, by either kind of upload and by write_file.
    let planned = FileAttrs::mode(0o755).expecting("0".repeat(64));
    std::fs::write(&local, b"replaced since planning").unwrap();
    for fresh in [false, true] {
        let up = if fresh {
            t.upload_new_file(&sshd.id(), &local, remote_s, &planned)
                .await
        } else {
            Transport::upload_file(&t, &sshd.id(), &local, remote_s, &planned).await
        };
        let e = up.expect_err("a file that is not the planned one is refused");
        // Refused here before sending, or on the host before the move.
        let e = e.to_string();
        assert!(
            e.contains("the plan expected") || e.contains("sha256 mismatch"),
            "{e}"
        );
        assert_eq!(std::fs::read(&remote).unwrap(), data);
        assert!(no_staging_files(remote.parent().unwrap()));
    }
    let e = t
        .write_file(&sshd.id(), remote_s, b"other".to_vec(), &planned)
        .await
        .expect_err("bytes that are not the planned ones are refused");
    assert!(e.to_string().contains("the plan expected"), "{e}");
    assert_eq!(std::fs::read(&remote).unwrap(), data);
    t.close_all().await;
}

/// Whether `dir` holds no staging file of an upload (`*.k0sform-…`).
fn no_staging_files(dir: &Path) -> bool {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".k0sform-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    true
}

/// Owner uid and gid of a path itself (not what a link points at).
fn owner_of(path: &Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).unwrap();
    (m.uid(), m.gid())
}

/// Issue 14, item 4: a user owning the destination folder plants links where k0sform writes as
/// root (the old fixed staging name `DST.k0sform-tmp`, and the destination itself); no write,
/// chmod or chown may reach the link's target.
#[tokio::test(flavor = "multi_thread")]
async fn uploads_never_follow_links_planted_at_the_destination() {
    require_lab!();
    use std::os::unix::fs::symlink;
    let sshd = Sshd::start();
    let t = connected(&sshd, "root").await;
    let folder = sshd.path("user-owned");
    std::fs::create_dir_all(&folder).unwrap();
    let victim = sshd.path("shadow");
    std::fs::write(&victim, b"root:secret\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o640)).unwrap();
    let local = sshd.path("app.conf");
    std::fs::write(&local, b"setting=1\n").unwrap();
    let nobody = FileAttrs::mode(0o644).owned_by(Some("65534".into()), Some("65534".into()));

    // The staging name of the old code, planted as a link: the upload must not write through it.
    let dst = folder.join("app.conf");
    symlink(&victim, folder.join("app.conf.k0sform-tmp")).unwrap();
    t.upload_file_report(&sshd.id(), &local, dst.to_str().unwrap(), &nobody)
        .await
        .unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"root:secret\n");
    assert_eq!(std::fs::read(&dst).unwrap(), b"setting=1\n");
    assert_eq!(owner_of(&dst), (65534, 65534));
    assert_eq!(mode_of(&dst), 0o644);

    // The destination itself a link to a file with the very bytes being uploaded: "already
    // there" must not chmod or chown the target; the link is replaced by a file of our own.
    std::fs::write(&victim, b"setting=1\n").unwrap();
    std::fs::remove_file(&dst).unwrap();
    symlink(&victim, &dst).unwrap();
    let up = t
        .upload_file_report(&sshd.id(), &local, dst.to_str().unwrap(), &nobody)
        .await
        .unwrap();
    assert_eq!(up.sha256.len(), 64);
    assert_eq!(mode_of(&victim), 0o640);
    assert_eq!(owner_of(&victim), (0, 0));
    assert!(
        !std::fs::symlink_metadata(&dst)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(owner_of(&dst), (65534, 65534));
    assert_eq!(mode_of(&dst), 0o644);

    // write_file (inline content, token and config files) likewise.
    let inline = folder.join("inline.txt");
    symlink(&victim, &inline).unwrap();
    t.write_file(&sshd.id(), inline.to_str().unwrap(), b"x".to_vec(), &nobody)
        .await
        .unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"setting=1\n");
    assert_eq!(owner_of(&victim), (0, 0));
    assert_eq!(owner_of(&inline), (65534, 65534));
    assert_eq!(std::fs::read(&inline).unwrap(), b"x");

    // A folder planted at the destination is not written into (`mv -T`).
    let dir_dst = folder.join("a-dir");
    std::fs::create_dir(&dir_dst).unwrap();
    assert!(
        t.write_file(
            &sshd.id(),
            dir_dst.to_str().unwrap(),
            b"x".to_vec(),
            &nobody
        )
        .await
        .is_err()
    );
    assert_eq!(std::fs::read_dir(&dir_dst).unwrap().count(), 0);

    // That failed write left no staging file behind (the planted old-style one aside).
    std::fs::remove_file(folder.join("app.conf.k0sform-tmp")).unwrap();
    assert!(no_staging_files(&folder));
    t.close_all().await;
}
