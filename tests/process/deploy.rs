//! The deployment files in `deploy/` parsed and checked for what running mosaicdb as a service
//! needs: the image's user, volume, port and shell-free health check; the compose file's volume and
//! health check; the Kubernetes StatefulSet's claim, probes, resources, key secret and grace period.
//! (`deploy/test-image.sh` builds and runs the image itself where a Docker engine is present.)

use std::path::Path;
use yaml_rust2::{Yaml, YamlLoader};

const UID: i64 = 10001;

fn deploy(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn yaml_docs(path: &str) -> Vec<Yaml> {
    YamlLoader::load_from_str(&deploy(path)).unwrap_or_else(|e| panic!("{path} is not YAML: {e}"))
}

/// The value at a dotted path (`spec.template.spec`), or `Yaml::BadValue`.
fn at<'a>(doc: &'a Yaml, path: &str) -> &'a Yaml {
    path.split('.').fold(doc, |node, key| &node[key])
}

fn text<'a>(doc: &'a Yaml, path: &str) -> &'a str {
    at(doc, path).as_str().unwrap_or_else(|| panic!("{path} is not a string: {:?}", at(doc, path)))
}

/// Dockerfile instructions (continuation lines joined), as (INSTRUCTION, arguments).
fn dockerfile() -> Vec<(String, String)> {
    let text = deploy("Dockerfile").replace("\\\n", " ");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (op, args) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            (op.to_ascii_uppercase(), args.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .collect()
}

fn instruction(lines: &[(String, String)], op: &str) -> Vec<String> {
    lines.iter().filter(|(o, _)| o == op).map(|(_, a)| a.clone()).collect()
}

#[test]
fn the_image_needs_no_base_runs_as_non_root_and_checks_itself_without_a_shell() {
    let lines = dockerfile();
    assert_eq!(instruction(&lines, "FROM"), ["scratch"], "no base image can be pulled here");
    assert_eq!(instruction(&lines, "USER"), [format!("{UID}:{UID}")]);
    assert_eq!(instruction(&lines, "VOLUME"), ["/data"]);
    assert_eq!(instruction(&lines, "EXPOSE"), ["8080"]);
    let env = instruction(&lines, "ENV").join(" ");
    assert!(env.contains("MOSAIC_ADDR=0.0.0.0:8080") && env.contains("MOSAIC_DATA_DIR=/data"), "{env}");
    let health = instruction(&lines, "HEALTHCHECK");
    assert_eq!(health.len(), 1);
    let cmd = health[0].split_once("CMD ").expect("HEALTHCHECK … CMD …").1;
    let cmd: Vec<String> = serde_json::from_str(cmd).expect("the exec (JSON) form: no shell in the image");
    assert_eq!(cmd, ["/mosaicdb", "health"]);
    assert_eq!(instruction(&lines, "STOPSIGNAL"), ["SIGTERM"]);
    let data = instruction(&lines, "COPY").into_iter().find(|c| c.ends_with(" /data")).expect("an empty /data");
    assert!(data.contains(&format!("--chown={UID}:{UID}")), "/data must belong to the user: {data}");
    // the user exists in the image's passwd, which build-image.sh writes
    let script = deploy("build-image.sh");
    assert!(script.contains(&format!("mosaic:x:{UID}:{UID}:")), "build-image.sh names the user");
    assert!(script.contains("+crt-static"), "the binary must be static for a scratch image");
}

#[test]
fn compose_keeps_data_on_a_named_volume_and_uses_the_images_health_check() {
    let docs = yaml_docs("docker-compose.yml");
    let doc = &docs[0];
    let server = at(doc, "services.mosaicdb");
    assert_eq!(text(server, "image"), "mosaicdb:latest");
    assert_eq!(text(server, "pull_policy"), "never");
    let volumes: Vec<&str> = server["volumes"].as_vec().expect("volumes").iter().filter_map(Yaml::as_str).collect();
    let named = volumes.iter().find_map(|v| v.strip_suffix(":/data")).expect("a volume at /data");
    assert!(!named.starts_with('.') && !named.starts_with('/'), "a named volume, not a bind mount: {named}");
    assert!(!at(doc, "volumes")[named].is_badvalue(), "the volume {named} is declared");
    let test: Vec<&str> =
        at(server, "healthcheck.test").as_vec().expect("test").iter().filter_map(Yaml::as_str).collect();
    assert_eq!(test, ["CMD", "/mosaicdb", "health"]);
    assert_eq!(text(server, "environment.MOSAIC_ADDR"), "0.0.0.0:8080");
    assert!(text(server, "environment.MOSAIC_API_KEYS").contains("MOSAIC_API_KEYS"));
    assert!(text(server, "stop_grace_period").ends_with('s'));
}

/// Every manifest in deploy/k8s, with the file it came from.
fn k8s() -> Vec<(String, Yaml)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            for doc in yaml_docs(&format!("k8s/{name}")) {
                out.push((name.clone(), doc));
            }
        }
    }
    out
}

fn of_kind<'a>(docs: &'a [(String, Yaml)], kind: &str) -> Vec<&'a Yaml> {
    docs.iter().filter(|(_, d)| d["kind"].as_str() == Some(kind)).map(|(_, d)| d).collect()
}

#[test]
fn the_statefulset_has_a_claim_probes_resources_keys_and_a_grace_period() {
    let docs = k8s();
    let sets = of_kind(&docs, "StatefulSet");
    assert_eq!(sets.len(), 1);
    let set = sets[0];
    assert_eq!(at(set, "spec.replicas").as_i64(), Some(1), "one node: mosaicdb does not replicate");
    let claims = at(set, "spec.volumeClaimTemplates").as_vec().expect("volumeClaimTemplates");
    let claim = text(&claims[0], "metadata.name");
    assert!(!at(&claims[0], "spec.resources.requests.storage").is_badvalue());

    let pod = at(set, "spec.template.spec");
    let grace = pod["terminationGracePeriodSeconds"].as_i64().expect("terminationGracePeriodSeconds");
    assert!(grace > 30, "in-flight requests may take the 30 s request timeout: grace {grace}");
    assert_eq!(at(pod, "securityContext.runAsNonRoot").as_bool(), Some(true));
    assert_eq!(at(pod, "securityContext.runAsUser").as_i64(), Some(UID));
    assert_eq!(at(pod, "securityContext.fsGroup").as_i64(), Some(UID), "the volume must be writable");

    let container = &pod["containers"][0];
    let mount = container["volumeMounts"].as_vec().unwrap().iter().find(|m| text(m, "mountPath") == "/data").unwrap();
    assert_eq!(text(mount, "name"), claim, "/data is the claim");
    assert_eq!(text(container, "livenessProbe.httpGet.path"), "/health");
    assert_eq!(text(container, "readinessProbe.httpGet.path"), "/ready");
    let port_name = text(container, "livenessProbe.httpGet.port");
    let ports = container["ports"].as_vec().unwrap();
    let port = ports.iter().find(|p| p["name"].as_str() == Some(port_name)).expect("the probe's port is declared");
    assert_eq!(port["containerPort"].as_i64(), Some(8080));
    assert!(!at(container, "resources.requests.cpu").is_badvalue());
    assert!(!at(container, "resources.requests.memory").is_badvalue());

    let env = container["env"].as_vec().unwrap();
    let addr = env.iter().find(|e| e["name"].as_str() == Some("MOSAIC_ADDR")).expect("MOSAIC_ADDR");
    assert_eq!(text(addr, "value"), "0.0.0.0:8080");
    let keys = env.iter().find(|e| e["name"].as_str() == Some("MOSAIC_API_KEYS")).expect("MOSAIC_API_KEYS");
    let secret_name = text(keys, "valueFrom.secretKeyRef.name");
    let secret_key = text(keys, "valueFrom.secretKeyRef.key");
    let secret = of_kind(&docs, "Secret").into_iter().find(|s| text(s, "metadata.name") == secret_name);
    let secret = secret.expect("the Secret the StatefulSet reads");
    assert!(!secret["stringData"][secret_key].is_badvalue(), "the secret holds {secret_key}");

    // every Service selects the pod and targets its port
    let labels = at(set, "spec.template.metadata.labels");
    let services = of_kind(&docs, "Service");
    assert!(!services.is_empty());
    assert!(services.iter().any(|s| text(s, "metadata.name") == text(set, "spec.serviceName")));
    for service in services {
        for (k, v) in at(service, "spec.selector").as_hash().expect("a selector") {
            assert_eq!(&labels[k.as_str().unwrap()], v, "the service selects the pod");
        }
        for p in at(service, "spec.ports").as_vec().unwrap() {
            assert_eq!(text(p, "targetPort"), port_name);
        }
    }
}

#[test]
fn kustomization_lists_every_manifest() {
    let docs = yaml_docs("k8s/kustomization.yaml");
    let mut listed: Vec<&str> = docs[0]["resources"].as_vec().unwrap().iter().filter_map(Yaml::as_str).collect();
    listed.sort_unstable();
    let mut files: Vec<String> = k8s().into_iter().map(|(f, _)| f).collect();
    files.dedup();
    files.sort_unstable();
    files.dedup();
    assert_eq!(listed, files);
}
